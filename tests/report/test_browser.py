"""report.html in a real browser (headless Chromium): every figure decodes and has a size.

Skips when no Chromium is installed (``apt-get install -y chromium``). The page is copied with a
probe script appended (the report itself has no script): after load it writes how many images
decoded into the DOM, which ``--dump-dom`` prints.
"""
from __future__ import annotations

import html
import re
import shutil
import subprocess

import pytest
from report_scenarios import SAMPLES

from forensics.pipeline import postmortem

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--virtual-time-budget=10000")
PROBE = """<script>
window.addEventListener("load", function () {
  var imgs = Array.prototype.slice.call(document.images);
  var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; });
  var dims = ok.map(function (i) { return i.naturalWidth + "x" + i.naturalHeight; });
  var p = document.createElement("pre");
  p.id = "probe";
  p.textContent = "PROBE loaded=" + ok.length + " total=" + imgs.length + " sizes=" + dims.join(",")
    + " details=" + document.querySelectorAll("details").length;
  document.body.appendChild(p);
});
</script>"""


def _browser():
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no Chromium installed (apt-get install -y chromium)")


def test_report_html_renders_with_every_image(nvbug_report, tmp_path):
    browser = _browser()
    r = nvbug_report
    page = tmp_path / "probe.html"
    page.write_text(r.report_html.read_text().replace("</body>", PROBE + "</body>"))
    profile = tmp_path / "profile"
    profile.mkdir()
    out = subprocess.run([browser, *FLAGS, f"--user-data-dir={profile}", "--dump-dom",
                          page.as_uri()], capture_output=True, text=True, timeout=120)
    m = re.search(r"PROBE loaded=(\d+) total=(\d+) sizes=(\S*) details=(\d+)", out.stdout)
    assert m, (out.returncode, out.stderr[-2000:])
    loaded, total, sizes, details = int(m[1]), int(m[2]), m[3], int(m[4])
    assert total == len(r.figures) == 3
    assert loaded == total
    for size in sizes.split(","):
        w, h = map(int, size.split("x"))
        assert w > 600 and h > 300
    assert details == len(r.mechanisms) == 1


TEXT_PROBE = """<script>
window.addEventListener("load", function () {
  var body = document.body.cloneNode(true);
  Array.prototype.forEach.call(body.querySelectorAll("pre, script"), function (e) { e.remove(); });
  document.body.appendChild(document.createElement("hr"));
  var p = document.createElement("pre");
  p.id = "probe-text";
  p.textContent = body.innerText || body.textContent;
  document.body.appendChild(p);
});
</script>"""


def _rendered_text(browser, report_html, tmp_path) -> str:
    """What a reader of the page sees, log excerpts (``<pre>``) left out."""
    page = tmp_path / "text-probe.html"
    page.write_text(report_html.read_text().replace("</body>", TEXT_PROBE + "</body>"))
    profile = tmp_path / "profile-text"
    profile.mkdir(exist_ok=True)
    out = subprocess.run([browser, *FLAGS, f"--user-data-dir={profile}", "--dump-dom",
                          page.as_uri()], capture_output=True, text=True, timeout=120)
    m = re.search(r'<pre id="probe-text">(.*?)</pre>', out.stdout, re.S)
    assert m, (out.returncode, out.stderr[-2000:])
    return html.unescape(m[1])


@pytest.mark.parametrize("inputs", [["nvbug-6438685"], ["nvbug-6438685/executor.log"]],
                         ids=["sample", "logs-only"])
def test_no_markup_shows_as_text(inputs, tmp_path):
    """Bold around inline code (the logs-only verdict names ``executor.log:610`` in code inside
    bold) once showed as literal ``**``: the rendered text has no ``**`` and no backtick."""
    browser = _browser()
    r = postmortem([SAMPLES / i for i in inputs], tmp_path / "report")
    text = _rendered_text(browser, r.report_html, tmp_path)
    assert "crashed" in text or "entry-assert" in text.lower()
    assert "**" not in text
    assert "`" not in text
