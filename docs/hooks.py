"""MkDocs hook: a page naming a module, a name in it or a repository file that does not exist is a
warning, which `mkdocs build --strict` turns into a failed build (docs/references.py finds them)."""

import importlib.util
import logging
from pathlib import Path

log = logging.getLogger("mkdocs.plugins.recrunner")
_spec = importlib.util.spec_from_file_location("recrunner_doc_references", Path(__file__).with_name("references.py"))
references = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(references)


def on_page_markdown(markdown, page, config, files):
    for stale in references.stale_references(markdown):
        log.warning(f"{page.file.src_path}: names {stale!r}, which does not exist in this repository")
    return markdown
