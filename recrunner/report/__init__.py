"""`recrunner report <sweep-dir>`: tables (Markdown, CSV, LaTeX), significance tests, charts."""

from .build import Report, build_report, discover, write_report

__all__ = ["Report", "build_report", "discover", "write_report"]
