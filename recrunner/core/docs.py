"""The documentation's pages by the titles a reader sees, for messages that send a user to one.

An installed recrunner has no docs/ folder, so a message names a page by its title (mkdocs.yml's
navigation), `(documentation: Fast mode)`, never by a file. tests/test_docs.py checks every title
here against mkdocs.yml.
"""

PAGES = {
    "configuration": "Configuration",
    "runs": "What a run leaves, and resume",
    "distributed": "Several processes, GPUs and machines",
    "models": "Every RecBole model",
    "fast": "Fast mode",
    "search": "Search",
    "protocols": "Evaluation protocols",
}


def page(name: str, section: str | None = None) -> str:
    """`documentation: Fast mode` or `documentation: What a run leaves, and resume > Exactness on each device`."""
    return f"documentation: {PAGES[name]}" + (f" > {section}" if section else "")
