"""The report: a Markdown summary, a self-contained HTML page (figures inline) and the PNGs."""

from crs.report.build import write_report

__all__ = ["write_report"]
