"""Rendering a report :class:`~forensics.report.document.Document` as one self-contained HTML file.

Self-contained means it opens from an e-mail attachment or an air-gapped machine: figures are
embedded as base64 SVG data URIs, the CSS is inline, and there is no reference to any other file
or URL (no script, stylesheet, image or link ``src``/``href`` outside ``data:`` and ``#``).
"""
from __future__ import annotations

import base64
import html

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
from forensics.report.inline import anchor, to_html

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;color:#1a1a1a;line-height:1.45}
h1{border-bottom:2px solid #cb181d;padding-bottom:.2em}
h2{margin-top:1.6em;border-bottom:1px solid #ddd}
code,pre{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.92em}
code{background:#f3f3f3;padding:0 .25em;border-radius:3px}
pre{background:#f6f6f6;border:1px solid #e0e0e0;padding:.7em;overflow-x:auto}
table{border-collapse:collapse;margin:.6em 0}
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f0f0f0}
figure{margin:1em 0}
figure img{max-width:100%;border:1px solid #e5e5e5}
figcaption{color:#555;font-size:.9em}
details{margin:.3em 0 1em}
summary{cursor:pointer;color:#333}
.lead{font-size:1.08em;border-left:4px solid #cb181d;padding-left:.7em}
"""

def data_uri(data: bytes, media_type: str = "image/png") -> str:
    """A ``data:MEDIA_TYPE;base64,...`` URI."""
    return f"data:{media_type};base64," + base64.b64encode(data).decode("ascii")


def render_html(doc: Document) -> str:
    """The document as a standalone HTML5 page."""
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           f"<title>{html.escape(doc.title)}</title>", f"<style>{_CSS}</style>", "</head>",
           "<body>", f"<h1>{to_html(doc.title)}</h1>"]
    for b in doc.blocks:
        if isinstance(b, Heading):
            lvl = min(6, max(2, b.level))
            out.append(f'<h{lvl} id="{anchor(b.text)}">{to_html(b.text)}</h{lvl}>')
        elif isinstance(b, Paragraph):
            out.append(f"<p>{to_html(b.text)}</p>")
        elif isinstance(b, Bullets):
            tag = "ol" if b.numbered else "ul"
            out.append(f"<{tag}>" + "".join(f"<li>{to_html(t)}</li>" for t in b.items) + f"</{tag}>")
        elif isinstance(b, Details):
            out.append(f"<details><summary>{to_html(b.summary)}</summary><ul>"
                       + "".join(f"<li>{to_html(t)}</li>" for t in b.items) + "</ul></details>")
        elif isinstance(b, Table):
            head = "".join(f"<th>{to_html(h)}</th>" for h in b.header)
            rows = "".join("<tr>" + "".join(f"<td>{to_html(c)}</td>" for c in r) + "</tr>"
                           for r in b.rows)
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif isinstance(b, Code):
            out.append(f"<pre>{html.escape(b.text)}</pre>")
        elif isinstance(b, FigureBlock):
            out.append(f'<figure><img alt="{html.escape(b.caption, quote=True)}" '
                       f'src="{data_uri(b.data, b.media_type)}"><figcaption>{to_html(b.caption)}</figcaption></figure>')
    out += ["</body>", "</html>"]
    return "\n".join(out) + "\n"
