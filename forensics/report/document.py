"""A report as a list of typed blocks, rendered to Markdown (``markdown``) and HTML (``html``).

Building the content once and rendering it twice keeps the two reports saying the same thing.
Text may use inline code spans (`` `like this` ``), ``**bold**`` (code inside it too) and links
to a section (``[text](#anchor)``); :mod:`forensics.report.inline` parses them once for both
renderers.
"""
from __future__ import annotations

import dataclasses
from typing import Union


@dataclasses.dataclass(frozen=True)
class Heading:
    """A section title (level 1 = the report title)."""

    level: int
    text: str


@dataclasses.dataclass(frozen=True)
class Paragraph:
    """A paragraph of text."""

    text: str


@dataclasses.dataclass(frozen=True)
class Bullets:
    """A bulleted (or numbered) list of short texts."""

    items: tuple[str, ...]
    numbered: bool = False


@dataclasses.dataclass(frozen=True)
class Table:
    """A table: header cells and rows of cells (texts)."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclasses.dataclass(frozen=True)
class Details:
    """A folded list: a one-line summary, opened to show the items (HTML ``<details>``)."""

    summary: str
    items: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Code:
    """A preformatted block (log excerpts)."""

    text: str


@dataclasses.dataclass(frozen=True)
class FigureBlock:
    """A figure: its file name in the report directory, the file's bytes (SVG or PNG, as the
    name says) and a caption."""

    name: str
    data: bytes = dataclasses.field(repr=False)
    caption: str

    @property
    def media_type(self) -> str:
        return "image/svg+xml" if self.name.endswith(".svg") else "image/png"


Block = Union[Heading, Paragraph, Bullets, Details, Table, Code, FigureBlock]


@dataclasses.dataclass(frozen=True)
class Document:
    """A titled sequence of blocks."""

    title: str
    blocks: tuple[Block, ...]

    def figures(self) -> list[FigureBlock]:
        return [b for b in self.blocks if isinstance(b, FigureBlock)]


def code(value) -> str:
    """A value read from an input (run id, build, path) as an inline code span both renderers
    show verbatim: backticks and line breaks in it cannot end the span or start a heading."""
    text = str(value)
    if not text:
        return "(empty)"
    text = text.replace("`", "\u02cb")  # modifier-letter grave: looks alike, ends no span
    text = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)
    return f"`{text}`"
