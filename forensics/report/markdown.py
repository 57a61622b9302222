"""Rendering a report :class:`~forensics.report.document.Document` as Markdown.

Figures are linked as files beside ``report.md`` (the post-mortem writes the SVGs there).
"""
from __future__ import annotations

import re

from forensics.report.document import (
    Bullets,
    Code,
    Details,
    Document,
    FigureBlock,
    Heading,
    Paragraph,
    Table,
)
from forensics.report.inline import to_html, to_markdown


def _text(text: str) -> str:
    """Inline text as Markdown (:mod:`forensics.report.inline`); line breaks become spaces (a
    value with a newline cannot start a heading or a list)."""
    return to_markdown(text)


def _cell(text: str) -> str:
    return _text(text).replace("|", "\\|")


def _fence(text: str) -> str:
    """A code fence longer than any backtick run inside the block."""
    runs = [len(m) for m in re.findall(r"`+", text)]
    return "`" * max(3, max(runs, default=0) + 1)


def render_markdown(doc: Document) -> str:
    """The document as GitHub-flavoured Markdown."""
    out = [f"# {_text(doc.title)}", ""]
    for b in doc.blocks:
        if isinstance(b, Heading):
            out += [f"{'#' * max(2, b.level)} {_text(b.text)}", ""]
        elif isinstance(b, Paragraph):
            out += [_text(b.text), ""]
        elif isinstance(b, Bullets):
            out += [f"{i + 1}. {_text(t)}" if b.numbered else f"- {_text(t)}"
                    for i, t in enumerate(b.items)]
            out.append("")
        elif isinstance(b, Details):
            out += [f"<details><summary>{to_html(b.summary)}</summary>", ""]
            out += [f"- {_text(t)}" for t in b.items]
            out += ["", "</details>", ""]
        elif isinstance(b, Table):
            out.append("| " + " | ".join(_cell(h) for h in b.header) + " |")
            out.append("|" + "|".join("---" for _ in b.header) + "|")
            out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in b.rows]
            out.append("")
        elif isinstance(b, Code):
            fence = _fence(b.text)
            out += [fence + "text", b.text.rstrip("\n"), fence, ""]
        elif isinstance(b, FigureBlock):
            out += [f"![{_text(b.caption)}]({b.name})", "", f"*{_text(b.caption)}*", ""]
    return "\n".join(out).rstrip("\n") + "\n"
