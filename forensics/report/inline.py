"""The inline markup of report text, parsed once and rendered as Markdown or HTML.

Report text uses three constructs, and nothing else is markup:

- a code span, `` `like this` `` (a value read from an input: :func:`document.code` makes sure
  no backtick or line break inside it can end the span);
- bold, ``**like this**``, which may hold code spans and links (``**rank `2` crashed**``);
- a link to a section of the same report, ``[the table](#builds-clean-on-this-runs-path)`` (only
  ``#anchor`` targets: the HTML report refers to no other file or URL).

Everything else is plain text: the Markdown rendering escapes what CommonMark would read as
markup (``*``, an ``_`` that could close emphasis, ``<``, ``&``, ``\\``, ``[text](x)``), the HTML one escapes
for HTML. Code spans win over bold (as in CommonMark): ``**`` inside a code span is literal.
"""
from __future__ import annotations

import dataclasses
import html
import re
from typing import Union

_CODE = re.compile(r"(`[^`]*`)")
_LINK = re.compile(r"\[([^\[\]`]+)\]\((#[a-z0-9][a-z0-9_-]*)\)")
#: Characters CommonMark reads as markup in plain text: backslash, HTML, entities, emphasis
#: stars, and a bracket that would close a link (``](``).
_MD_PLAIN = re.compile(r"([\\<&*]|\](?=\())")
#: Only an underscore not followed by a letter or digit can close emphasis (one inside a word,
#: as in ``_pad_attention_dp_dummy_request``, cannot): escaping those leaves no emphasis.
_MD_CLOSING_UNDERSCORE = re.compile(r"_(?![0-9A-Za-z])")


@dataclasses.dataclass(frozen=True)
class Text:
    text: str


@dataclasses.dataclass(frozen=True)
class CodeSpan:
    text: str


@dataclasses.dataclass(frozen=True)
class Bold:
    children: tuple["Node", ...]


@dataclasses.dataclass(frozen=True)
class Link:
    children: tuple["Node", ...]
    href: str


Node = Union[Text, CodeSpan, Bold, Link]


def _links(text: str) -> list[Node]:
    out: list[Node] = []
    pos = 0
    for m in _LINK.finditer(text):
        if m.start() > pos:
            out.append(Text(text[pos:m.start()]))
        out.append(Link((Text(m[1]),), m[2]))
        pos = m.end()
    if pos < len(text):
        out.append(Text(text[pos:]))
    return out


def parse(text: str) -> tuple[Node, ...]:
    """The nodes of one line of report text (line breaks become spaces)."""
    pieces = _CODE.split(" ".join(str(text).splitlines()))
    # Stars pair up across code spans: ``**a `b` c**`` is bold around a code span.
    tokens: list[tuple[str, str]] = []          # ("text" | "code" | "bold", value)
    for i, piece in enumerate(pieces):
        if i % 2:
            tokens.append(("code", piece[1:-1]))
            continue
        for j, part in enumerate(piece.split("**")):
            if j:
                tokens.append(("bold", "**"))
            if part:
                tokens.append(("text", part))
    opens = [k for k, (kind, _) in enumerate(tokens) if kind == "bold"]
    if len(opens) % 2:                           # an unpaired ** is plain text
        kind, value = tokens[opens[-1]]
        tokens[opens[-1]] = ("text", value)
    out: list[Node] = []
    stack: list[list[Node]] = [out]
    for kind, value in tokens:
        if kind == "code":
            stack[-1].append(CodeSpan(value))
        elif kind == "text":
            stack[-1].extend(_links(value))
        elif len(stack) == 1:
            stack.append([])
        else:
            children = stack.pop()
            stack[-1].append(Bold(tuple(children)))
    return tuple(_merge(out))


def _merge(nodes: list[Node]) -> list[Node]:
    """Adjacent texts as one (an unpaired ``**`` leaves them split)."""
    out: list[Node] = []
    for n in nodes:
        if isinstance(n, Text) and out and isinstance(out[-1], Text):
            out[-1] = Text(out[-1].text + n.text)
        else:
            out.append(n)
    return out


def plain(text: str) -> str:
    """What a reader sees: the text without its markup."""
    return "".join(_plain(n) for n in parse(text))


def _plain(n: Node) -> str:
    if isinstance(n, (Text, CodeSpan)):
        return n.text
    return "".join(_plain(c) for c in n.children)


def _md_span(text: str) -> str:
    """A code span around ``text``: its delimiter is longer than any backtick run inside."""
    longest = max((len(r) for r in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _md(n: Node) -> str:
    if isinstance(n, Text):
        return _MD_CLOSING_UNDERSCORE.sub(r"\\_", _MD_PLAIN.sub(r"\\\1", n.text))
    if isinstance(n, CodeSpan):
        return _md_span(n.text)
    inner = "".join(_md(c) for c in n.children)
    if isinstance(n, Bold):
        return f"**{inner}**"
    return f"[{inner}]({n.href})"


def to_markdown(text: str) -> str:
    """The text as CommonMark / GitHub-flavoured Markdown inline content."""
    return "".join(_md(n) for n in parse(text))


def _html(n: Node) -> str:
    if isinstance(n, Text):
        return html.escape(n.text, quote=True)
    if isinstance(n, CodeSpan):
        return f"<code>{html.escape(n.text, quote=True)}</code>"
    inner = "".join(_html(c) for c in n.children)
    if isinstance(n, Bold):
        return f"<strong>{inner}</strong>"
    return f'<a href="{html.escape(n.href, quote=True)}">{inner}</a>'


def to_html(text: str) -> str:
    """The text as HTML inline content (escaped; ``<code>``, ``<strong>``, ``<a href="#...">``)."""
    return "".join(_html(n) for n in parse(text))


def anchor(text: str) -> str:
    """The id GitHub gives a heading: lower case, markup and punctuation dropped, spaces as
    hyphens (``Builds clean on this run's path`` -> ``builds-clean-on-this-runs-path``)."""
    words = re.sub(r"[^\w\- ]", "", plain(text).lower())
    return words.replace(" ", "-")


__all__ = ["Bold", "CodeSpan", "Link", "Node", "Text", "anchor", "parse", "plain", "to_html",
           "to_markdown"]
