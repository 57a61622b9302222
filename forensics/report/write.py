"""The report's files: the figures, ``report.md``, ``report.html`` and ``findings.json``."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from forensics.output_dir import ReportDir
from forensics.report.document import Document
from forensics.report.html import render_html
from forensics.report.markdown import render_markdown


def write_report(report_dir: ReportDir, doc: Document, figures, findings: dict,
                 extra: dict[str, bytes] | None = None) -> tuple[list[Path], Path, Path, Path]:
    """Write the figures (SVG), the document as Markdown and as self-contained HTML, and the
    findings as JSON into an opened report directory, then finish it (files an earlier report
    wrote and this one did not are removed). ``extra``: further files by name (the open paths'
    witness traces). Returns the figures' paths and the three files'."""
    written = [report_dir.write(fig.name, fig.data) for fig in figures]
    for name, data in (extra or {}).items():
        report_dir.write(name, data)
    md = report_dir.write("report.md", render_markdown(doc).encode())
    html_path = report_dir.write("report.html", render_html(doc).encode())
    fj = report_dir.write("findings.json",
                          (json.dumps(findings, indent=2, default=_json_default) + "\n").encode())
    report_dir.finish()
    return written, md, html_path, fj


def _json_default(o):
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    if o is pd.NA:
        return None
    return str(o)


__all__ = ["write_report"]
