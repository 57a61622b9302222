"""The report's verdict line, what to do, the opening sentence, the chain grouped by mechanism,
and report.md escaping."""
from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from report_scenarios import RUN_RECORD, SAMPLES, _frame, write_trace

import replay
from forensics.answer import PARAGRAPH_WORDS, VERDICT_WORDS, words
from forensics.cli import cli
from forensics.pipeline import postmortem
from forensics.causal_chain import mechanisms, opening_sentence
from forensics.report.inline import to_markdown

#: Two leaks by two different predicate gaps under prefix-2026 (2 ranks, max_batch_size 4, cap 4,
#: disaggregated, so no crash): at iter 0 rank 0 holds only GENERATION_TO_COMPLETE (counted, refused
#: by the window [10, 14)) -> batch 0, no dummy; rank 1 holds only state 9 (not counted) -> padded;
#: the fleet skips and rank 1's dummy leaks. At iter 2 rank 0 holds only
#: DISAGG_CONTEXT_WAIT_SCHEDULER (7: counted by the legacy predicate, refused by the window): the
#: same again, a second leak on rank 1 caused by another state.
TWO_GAPS = [
    _frame(0, 0, (1, "GENERATION_TO_COMPLETE")),
    _frame(0, 1, (5, "DISAGG_GENERATION_TRANS_IN_PROGRESS")),
    _frame(1, 0, (2, "GENERATION_IN_PROGRESS")),
    _frame(1, 1, (5, "DISAGG_GENERATION_TRANS_IN_PROGRESS")),
    _frame(2, 0, (3, "DISAGG_CONTEXT_WAIT_SCHEDULER")),
    _frame(2, 1, (6, "DISAGG_GENERATION_TRANS_IN_PROGRESS")),
    _frame(3, 0, (2, "GENERATION_IN_PROGRESS")),
    _frame(3, 1, (6, "DISAGG_GENERATION_TRANS_IN_PROGRESS")),
]


def _records(frames, **run):
    return [{**RUN_RECORD, "max_batch_size": 4, "max_num_active_requests": 4, **run}, *frames]


def test_opening_sentence_names_the_three_behaviours(crash_report):
    """Hand-worked (report_scenarios): rank 1 holds GENERATION_TO_COMPLETE request 20 at iter 1,
    the fleet skips iter 1, rank 0's dummy padded at iter 1 survives, and at iter 2 rank 0 holds
    2 real + the dummy = 3 > expected 2 (the cap). The long sentence opens the causal chain."""
    r = crash_report
    s = r.opening
    assert s.startswith("Under prefix-2026 (the build that recorded the run) rank 0 crashed at "
                        "iteration 2 (AssertionError")
    assert "rank 1 held only GENERATION_TO_COMPLETE requests (id 20)" in s
    assert "the whole fleet skipped iteration 1" in s
    assert "padded on rank 0 at iteration 1 stayed (prefix-2026 does not roll back" in s
    assert "2 real requests + the leaked dummy = 3 > expected_num_active_requests 2 (capped at 2)" in s
    assert "move to sched-aware-16921, clean on this run's path (disaggregated, pp_size 1)" in s
    assert s.count(". ") == 0 and s.endswith(".")   # one sentence
    md = r.report_md.read_text()
    chain = md.split("## Causal chain under prefix-2026\n\n")[1]
    assert chain.startswith(to_markdown(s))
    f = json.loads(r.findings_json.read_text())
    assert f["opening"] == s


def test_the_report_reads_verdict_then_what_to_do_then_evidence(crash_inputs, tmp_path):
    """The same run. The verdict: rank 0, iteration 2, the entry assert, under prefix-2026,
    because rank 1's empty batch at iteration 1 made the fleet skip it. The builds to move to,
    best first: sched-aware-16921, postpad-17379, newest, kv-connector-19164 (#19250, merged),
    dkv (fix-16161 never merged; fix-16279 and tolerant-17278 are clean only for DeepSeek-V4, a
    model the trace does not name), each clean
    on this run's path and still open on the other two paths (aggregated pp 1, disaggregated pp 2)
    where a leak is warned about. Report, terminal, findings.json: the same order."""
    r = postmortem(crash_inputs, tmp_path / "report")
    verdict = ("Rank 0 crashed at iteration 2 (entry assert) under prefix-2026: a dummy leaked "
               "when rank 1's empty batch made the fleet skip iteration 1.")
    assert r.verdict == verdict and words(verdict) == 24
    assert [st.build for st in r.what_to_do] == ["sched-aware-16921", "postpad-17379", "newest",
                                                 "kv-connector-19164", "dkv"]
    assert r.what_to_do[-1].text.startswith("**dkv** (later main): ")   # no PR of its own
    first = r.what_to_do[0]
    assert (first.pr, first.clean_on) == ("#16921", "this run's path")
    assert first.stays_open == ("still open on 2 other paths: leaks are warned about and waste "
                                "capacity")
    md = r.report_md.read_text()
    blocks = md.split("\n\n")
    assert blocks[0] == "# ADP post-mortem: run `hand`"
    assert blocks[1] == f"**{verdict}**"
    assert blocks[2] == "## What to do"
    assert blocks[3].splitlines()[0] == (
        "- **sched-aware-16921** (PR #16921): clean on this run's path; still open on 2 other "
        "paths: leaks are warned about and waste capacity "
        "([details](#builds-clean-on-this-runs-path)).")
    headings = [b for b in blocks if b.startswith("## ")]
    assert headings[:3] == ["## What to do", "## Causal chain under prefix-2026", "## Exit status"]
    html = r.report_html.read_text()
    assert '<h3 id="builds-clean-on-this-runs-path">' in html
    f = json.loads(r.findings_json.read_text())
    assert list(f)[:3] == ["tool", "verdict", "what_to_do"]
    assert f["verdict"] == verdict
    assert f["what_to_do"][0] == {
        "build": "sched-aware-16921", "pr": "#16921", "clean_on": "this run's path",
        "stays_open": "still open on 2 other paths: leaks are warned about and waste capacity",
        "text": "sched-aware-16921 (PR #16921): clean on this run's path; still open on 2 other "
                "paths: leaks are warned about and waste capacity."}
    out = CliRunner().invoke(cli, ["postmortem", *map(str, crash_inputs), "-o",
                                   str(tmp_path / "cli")]).stdout.splitlines()
    assert out[0] == verdict and out[1] == "What to do:"
    assert out[2] == f"  - {f['what_to_do'][0]['text']}"
    assert out.index("Causal chain:") == 2 + 5    # the verdict, the heading, a line per build


def _before_the_chain(md: str) -> list[str]:
    """The paragraphs and list items of report.md a reader meets before the causal chain."""
    out = []
    for block in md.split("\n\n")[1:]:
        if block.startswith("## Causal chain"):
            return out
        if block.startswith(("#", "|")):
            continue
        out += [line[2:] for line in block.splitlines()] if block.startswith("- ") else [block]
    raise AssertionError("no causal chain in the report")


@pytest.mark.parametrize("inputs", [["nvbug-6438685"], ["nvbug-6438685/executor.log"]],
                         ids=["sample", "logs-only"])
def test_the_answer_fits_ten_seconds(inputs, tmp_path):
    """The bundled sample, traced and from its log alone: a verdict of at most 25 words, and no
    paragraph or list item over 60 words before the causal chain (the opening sentence was 147
    words traced, 130 from the log)."""
    r = postmortem([SAMPLES / i for i in inputs], tmp_path / "report")
    assert words(r.verdict) <= VERDICT_WORDS == 25
    seen = _before_the_chain(r.report_md.read_text())
    assert seen[0] == f"**{r.verdict}**"
    assert len(seen) >= 4                     # the verdict and at least three lines to act on
    assert max(words(p) for p in seen) <= PARAGRAPH_WORDS == 60, \
        max(seen, key=words)
    assert words(r.opening) > 60              # the long sentence is still there, in the chain


def test_recommendation_names_open_paths(crash_report):
    """The run names no model and runs the non-overlap loop. fix-16161 replays it clean but never
    shipped (closed as a duplicate of #16279), so it is no build to move to; fix-16279 and
    tolerant-17278 apply their window only to DeepSeek-V4, so replayed both ways they are not
    clean. sched-aware-16921's count is on without overlap for any model, but only at pp_size 1
    (PR #16921) and never on the aggregated path, which keeps counting GENERATION_TO_COMPLETE."""
    r = crash_report
    rec = {a.policy: a for a in r.recommended}
    assert set(rec) == {"sched-aware-16921", "postpad-17379", "newest", "kv-connector-19164", "dkv"}
    assert [p.label for p in rec["sched-aware-16921"].open_paths] == \
        ["aggregated, pp_size 1", "disaggregated, pp_size 2"]
    assert rec["sched-aware-16921"].open_paths[0].gap_states == ("GENERATION_TO_COMPLETE",)
    assert "warned" in rec["sched-aware-16921"].open_paths[0].outcome
    assert "still open on aggregated, pp_size 1" in r.next_step
    assert "fix-16161" not in r.next_step.split("Move to")[-1].split(".")[0]
    md = r.report_md.read_text()
    assert "### Builds clean on this run's path" in md


def test_chain_grouped_by_mechanism_fatal_first():
    frames = replay.RunFrames.from_records(_records(TWO_GAPS))
    res = replay.run(frames, policy="prefix-2026")
    assert [(x.rank, x.iter_created, x.iter_skipped, x.cause_ranks) for x in res.leak_records] == \
        [(1, 0, 0, (0,)), (1, 2, 2, (0,))]
    ms = mechanisms(res)
    assert [(m.kind, m.states, m.count) for m in ms] == [
        ("predicate-gap", ("GENERATION_TO_COMPLETE",), 1),
        ("predicate-gap", ("DISAGG_CONTEXT_WAIT_SCHEDULER",), 1)]
    assert "Skipped iteration 0; zero batch on rank 0." in ms[0].text
    assert ms[0].items[0].startswith("rank 1: ")
    assert "removed at iter 1 by _update_request_states_tp" in ms[0].items[0]
    # No crash: the sentence says how many leaked and why there was no crash.
    s = opening_sentence(res)
    assert s.startswith("Under prefix-2026 2 dummies leaked without a crash (no rank reached the cap)")


def test_nvbug_sample_one_mechanism_fatal_leak_first(nvbug_report):
    """The bundled NVBug sample: 22 leaks under prefix-2026, all through the same gap
    (GENERATION_TO_COMPLETE counted, refused by the scheduler); the fatal one (rank 2, padded at
    75) first in the report, the API, findings.json and the plugin's chain."""
    r = nvbug_report
    assert len(r.mechanisms) == 1
    m = r.mechanisms[0]
    assert (m.count, m.fatal, m.states) == (22, True, ("GENERATION_TO_COMPLETE",))
    assert m.items[0].startswith("rank 2: generation dummy padded at iter 75")
    md = r.report_md.read_text()
    chain = md.split("## Causal chain under prefix-2026")[1].split("## Figures")[0]
    assert chain.count("<details><summary>The 22 leaks it explains</summary>") == 1
    assert chain.index("**The fatal leak.** iter 75:") < chain.index("**The crash.**")
    assert len(chain.split()) < 2200
    html = r.report_html.read_text()
    assert "<details><summary>The 22 leaks it explains</summary><ul><li>rank 2: generation dummy" in html
    f = json.loads(r.findings_json.read_text())
    assert f["chain"]["lines"][0].startswith("iter 75: ")
    assert f["chain"]["mechanisms"][0]["count"] == 22
    res = replay.run(replay.RunFrames.from_dataset(__import__("forensics").load(
        r.out_dir / ".dataset")), policy="prefix-2026")
    assert res.explain()[0] == f["chain"]["lines"][0]
    assert "AssertionError" in res.explain()[0]


def test_report_md_escapes_values_from_inputs(tmp_path):
    """A run id with HTML and a newline, a build with backticks: report.md shows them as code
    spans, never raw HTML or a new heading (issue 14 item 7)."""
    from report_scenarios import CRASH_FRAMES
    d = tmp_path / "in"
    d.mkdir()
    evil_run = "<script>alert(1)</script>\n# pwned"
    evil_build = "b`uild **x** [l](http://e)"
    path = d / "trace.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in
                              [{**RUN_RECORD, "run_id": evil_run, "build": evil_build},
                               *CRASH_FRAMES]) + "\n")
    r = postmortem([path], tmp_path / "report")
    md = r.report_md.read_text()
    assert "# pwned" not in [ln.strip() for ln in md.splitlines()]
    assert not re.search(r"^#+ pwned", md, re.M)
    # Every occurrence of the script tag sits inside a code span.
    for line in md.splitlines():
        outside = re.sub(r"`[^`]*`", "", line)
        assert not re.search(r"(?<!\\)<script>", outside), line
        assert "](http://e)" not in outside, line
    assert "`b\u02cbuild **x** [l](http://e)`" in md
    html = r.report_html.read_text()
    assert "<script>" not in html


def test_replayed_clean_build_with_a_remaining_gap_says_so(tmp_path):
    """The aggregated-overlap sample: only postpad-17379, newest and the entries that decide as
    newest (kv-connector-19164, dkv without a dkv configuration) replay it clean, but their
    aggregated predicate still counts GENERATION_TO_COMPLETE and post-schedule padding works only
    below the cap, so this run's own path is marked as still open at the cap."""
    r = postmortem([SAMPLES / "aggregated-overlap"], tmp_path / "r")
    rec = {a.policy: a for a in r.recommended}
    assert set(rec) == {"postpad-17379", "newest", "kv-connector-19164", "dkv"}
    here = rec["postpad-17379"].here
    assert here is not None and here.gap_states == ("GENERATION_TO_COMPLETE",)
    assert "warned" in here.outcome
    assert "clean in the replay, but counts GENERATION_TO_COMPLETE" in r.report_md.read_text()
