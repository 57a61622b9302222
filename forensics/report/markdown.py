"""Rendering a report :class:`~forensics.report.document.Document` as Markdown.

Figures are linked as files beside ``report.md`` (the post-mortem writes the PNGs there).
"""
from __future__ import annotations

from forensics.report.document import (
    Bullets,
    Code,
    Document,
    FigureBlock,
    Heading,
    Paragraph,
    Table,
)


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(doc: Document) -> str:
    """The document as GitHub-flavoured Markdown."""
    out = [f"# {doc.title}", ""]
    for b in doc.blocks:
        if isinstance(b, Heading):
            out += [f"{'#' * max(2, b.level)} {b.text}", ""]
        elif isinstance(b, Paragraph):
            out += [b.text, ""]
        elif isinstance(b, Bullets):
            out += [f"{i + 1}. {t}" if b.numbered else f"- {t}" for i, t in enumerate(b.items)]
            out.append("")
        elif isinstance(b, Table):
            out.append("| " + " | ".join(_cell(h) for h in b.header) + " |")
            out.append("|" + "|".join("---" for _ in b.header) + "|")
            out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in b.rows]
            out.append("")
        elif isinstance(b, Code):
            fence = "````" if "```" in b.text else "```"
            out += [fence + "text", b.text.rstrip("\n"), fence, ""]
        elif isinstance(b, FigureBlock):
            out += [f"![{b.caption}]({b.name})", "", f"*{b.caption}*", ""]
    return "\n".join(out).rstrip("\n") + "\n"
