"""Inline markup of report text (``forensics.report.inline``), construct by construct: the HTML
is worked by hand, and the Markdown, read by a CommonMark parser, must give the same HTML."""
from __future__ import annotations

import re

import pytest
from report_scenarios import SAMPLES

from forensics.pipeline import postmortem
from forensics.report.document import Document, Heading, Paragraph, Table
from forensics.report.html import render_html
from forensics.report.inline import (
    Bold,
    CodeSpan,
    Link,
    Text,
    anchor,
    parse,
    plain,
    to_html,
    to_markdown,
)
from forensics.report.markdown import render_markdown

markdown_it = pytest.importorskip("markdown_it")
COMMONMARK = markdown_it.MarkdownIt("commonmark").enable("table")

CASES = [
    # (report text, the HTML a reader's browser gets)
    ("plain words", "plain words"),
    ("`run-7`", "<code>run-7</code>"),
    ("**bold**", "<strong>bold</strong>"),
    ("**Entry-assert on rank 2 (`executor.log:610`) after the skip**: the logs",
     "<strong>Entry-assert on rank 2 (<code>executor.log:610</code>) after the skip</strong>: the logs"),
    ("**`fix-16279`**", "<strong><code>fix-16279</code></strong>"),
    ("**`a` and `b`** then **c**",
     "<strong><code>a</code> and <code>b</code></strong> then <strong>c</strong>"),
    ("`**not bold**`", "<code>**not bold**</code>"),
    ("see [the table](#builds-clean-on-this-runs-path).",
     'see <a href="#builds-clean-on-this-runs-path">the table</a>.'),
    ("**see [the table](#t)**", '<strong>see <a href="#t">the table</a></strong>'),
    ("[not a link](http://example.com) stays text",
     "[not a link](http://example.com) stays text"),
    ("pp_size*max_batch_size = 4 and a*b*c", "pp_size*max_batch_size = 4 and a*b*c"),
    ("_update_request_states_tp and __init__ and foo_ bar_",
     "_update_request_states_tp and __init__ and foo_ bar_"),
    ("a < b & c > d", "a &lt; b &amp; c &gt; d"),
    ("an unpaired ** stays", "an unpaired ** stays"),
    ("back\\slash", "back\\slash"),
]


@pytest.mark.parametrize("text, expected", CASES)
def test_html(text, expected):
    assert to_html(text) == expected


@pytest.mark.parametrize("text, expected", CASES)
def test_markdown_reads_back_as_the_same_html(text, expected):
    assert COMMONMARK.renderInline(to_markdown(text)) == expected


def test_parse_bold_around_code():
    assert parse("**a `b` c**: d") == (Bold((Text("a "), CodeSpan("b"), Text(" c"))), Text(": d"))
    assert parse("[x](#y)") == (Link((Text("x"),), "#y"),)
    assert plain("**Rank `2`** crashed, see [the table](#t)") == "Rank 2 crashed, see the table"


def test_a_table_with_code_and_a_pipe_in_a_cell():
    doc = Document("t", (Table(("build", "note"),
                               (("`fix-16279`", "**`a|b`** and *x*"),)),))
    html = render_html(doc)
    cells = "<td><code>fix-16279</code></td><td><strong><code>a|b</code></strong> and *x*</td>"
    assert cells in html
    md = COMMONMARK.render(render_markdown(doc))
    assert cells.replace("</td><td>", "</td>\n<td>") in md


def test_headings_carry_the_anchor_links_point_to():
    assert anchor("Builds clean on this run's path") == "builds-clean-on-this-runs-path"
    assert anchor("Causal chain under `prefix-2026`") == "causal-chain-under-prefix-2026"
    doc = Document("t", (Paragraph("[the table](#builds-clean-on-this-runs-path)"),
                         Heading(3, "Builds clean on this run's path")))
    assert '<h3 id="builds-clean-on-this-runs-path">' in render_html(doc)


@pytest.mark.parametrize("inputs", [["nvbug-6438685"], ["nvbug-6438685/executor.log"]],
                         ids=["sample", "logs-only"])
def test_report_md_read_by_a_commonmark_parser_shows_no_markup(inputs, tmp_path):
    """report.md as GitHub would show it: outside code, no literal ``**`` or backtick, and every
    section link lands on a heading."""
    r = postmortem([SAMPLES / i for i in inputs], tmp_path / "report")
    html = COMMONMARK.render(r.report_md.read_text())
    text = re.sub(r"<pre>.*?</pre>|<code>.*?</code>", "", html, flags=re.S)
    text = re.sub(r"<[^>]+>", "", text)
    assert "**" not in text and "`" not in text
    links = re.findall(r'href="#([^"]+)"', html)
    headings = {anchor(h) for h in re.findall(r"^#+ (.*)$", r.report_md.read_text(), flags=re.M)}
    assert links and set(links) <= headings
