"""End-to-end post-mortems: hand-made inputs (see conftest), bundled samples, real logs, the CLI."""
from __future__ import annotations

import base64
import json
import re
import shutil
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner
from report_scenarios import CLEAN_FRAMES, CRASH_FRAMES, SAMPLES, crash_log, write_trace

from forensics.cli import cli
from forensics.errors import ForensicsError
from forensics.pipeline import postmortem
from forensics.report.narrative import comparison_policy

SVG_ROOT = "{http://www.w3.org/2000/svg}svg"


def test_findings_match_the_hand_worked_crash(crash_report):
    """The conftest docstring works the arithmetic: prefix-2026 leaks a dummy on rank 0 at
    iteration 1 (skip caused by rank 1) and asserts there at iteration 2 (3 active > expected 2);
    legacy-2025 leaks without crashing; every later policy is clean. The log shows the assert on
    rank 0 at iteration 2 (last iteration line ``iter = 2``), at rank0.log line 4."""
    r = crash_report
    f = json.loads(r.findings_json.read_text())
    pol = f["policies"]
    assert pol["prefix-2026"]["crash"] == {"iter": 2, "rank": 0, "expected": 2, "active": 3}
    assert pol["prefix-2026"]["leaks"] == [{"rank": 0, "iter_created": 1, "iter_skipped": 1,
                                            "cause_ranks": [1]}]
    assert pol["legacy-2025"]["crash"] is None
    assert pol["legacy-2025"]["leaks"][0]["iter_skipped"] == 1
    for name in ("fix-16161", "sched-aware-16921", "postpad-17379", "newest"):
        assert pol[name]["leaks"] == [] and pol[name]["crash"] is None, name
    # The trace names no model: the merged fix is the crashing code unless it is DeepSeek-V4.
    assert pol["fix-16279"]["verdict_text"] == "crash unless the model is DeepSeek-V4"
    assert pol["tolerant-17278"]["verdict_text"] == "leak unless the model is DeepSeek-V4"
    assert pol["prefix-2026"]["first_divergence"] is None
    crash = f["log_crash"]
    assert (crash["kind"], crash["rank"], crash["iter"], crash["line"]) == ("entry-assert", 0, 2, 4)
    assert crash["code_location"].endswith("py_executor.py:2150")
    # disaggregated pp 1, model not named: prefix-2026 and the merged fix outside its gate
    assert crash["policies"] == ["prefix-2026", "fix-16279"]
    assert f["verdicts"]["prefix-2026"]["reproduces_log_crash"] is True
    assert f["verdicts"]["legacy-2025"]["reproduces_log_crash"] is False
    assert f["exit_status"] == 1 and r.exit_status == 1
    assert f["chain"]["policy"] == "prefix-2026"
    assert "rank 1" in f["chain"]["lines"][0] and "GENERATION_TO_COMPLETE" in f["chain"]["lines"][0]
    # the first clean version that shipped (fix-16161 is clean but was never merged)
    assert "sched-aware-16921" in r.next_step and "fix-16161" not in r.next_step
    assert f["dataset"]["rows"]["frames"] == 6
    kinds = [e["kind"] for e in f["crash_events"]]
    assert kinds == ["event-loop-error", "entry-assert"]
    assert f["crash_events"][0]["follows"] == 1


def test_report_files_and_figures(crash_report):
    r = crash_report
    names = sorted(p.name for p in r.figures)
    assert names == ["active_requests.svg", "decision_strip.svg", "request_states.svg"]
    for p in r.figures:
        data = p.read_bytes()
        assert ET.fromstring(data).tag == SVG_ROOT and len(data) > 3_000, p
    md = r.report_md.read_text()
    assert "entry-assert" in md and "prefix-2026" in md and "(active_requests.svg)" in md
    assert "AssertionError" in md  # the traceback excerpt, verbatim from the log
    # report.md links the files beside it; report.html embeds the same bytes
    linked = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert sorted(linked) == names and all((r.out_dir / n).is_file() for n in linked)
    refs = _Refs()
    refs.feed(r.report_html.read_text())
    prefix = "data:image/svg+xml;base64,"
    embedded = [base64.b64decode(v[len(prefix):]) for v in refs.refs if v.startswith(prefix)]
    assert refs.imgs == 3 and embedded == [(r.out_dir / n).read_bytes() for n in linked]


def test_the_strip_compares_the_recording_build_with_the_recommended_one(crash_inputs, tmp_path):
    """The scenario's recording build is prefix-2026 (crash). Clean replays in catalogue order:
    fix-16161 (never merged: no build to move to), then sched-aware-16921, the first build the
    report recommends (fix-16279 and tolerant-17278 depend on the model the trace does not
    name). The strip sets the recording build beside the recommended one."""
    r = postmortem(crash_inputs, tmp_path / "report")
    assert r.recommended[0].policy == "sched-aware-16921"
    strip = (r.out_dir / "decision_strip.svg").read_text()
    assert "prefix-2026 (the recording build, replayed)" in strip
    assert "sched-aware-16921 (recommended, replayed, no leak)" in strip
    assert "fix-16161" not in strip
    assert ("prefix-2026 (the recording build) compared with sched-aware-16921, the build the "
            "report recommends.") in r.report_md.read_text()


def test_comparison_policy_prefers_the_recommended_build():
    clean = ["fix-16161", "fix-16279", "newest"]
    assert comparison_policy("prefix-2026", clean, ["fix-16279", "newest"]) == "fix-16279"
    assert comparison_policy("prefix-2026", clean, ["postpad-17379", "newest"]) == "newest"
    assert comparison_policy("prefix-2026", clean, []) == "fix-16161"    # nothing recommended
    assert comparison_policy("fix-16279", ["fix-16279"], ["fix-16279"]) is None


class _Refs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs: list[str] = []
        self.imgs = 0

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.imgs += 1
        for k, v in attrs:
            if k in ("src", "href", "srcset", "action", "data") and v is not None:
                self.refs.append(v)
        if tag in ("script", "link", "iframe", "object", "embed"):
            self.refs.append(f"<{tag}>")


def test_html_is_self_contained(crash_report, tmp_path):
    r = crash_report
    text = r.report_html.read_text()
    p = _Refs()
    p.feed(text)
    assert p.imgs == 3
    prefix = "data:image/svg+xml;base64,"
    # Links stay in the page: each "What to do" line points at the table's heading.
    anchors = [ref for ref in p.refs if ref.startswith("#")]
    assert anchors and all(f'id="{a[1:]}"' in text for a in anchors)
    images = [ref for ref in p.refs if not ref.startswith("#")]
    assert images and all(ref.startswith(prefix) for ref in images), \
        [x[:40] for x in images if not x.startswith("data:")]
    assert "http://" not in text and "https://" not in text
    for ref in images:   # the figures fetch nothing either (the namespace is a name, not a fetch)
        svg = base64.b64decode(ref[len(prefix):]).decode()
        assert "href" not in svg and svg.count("http") == 1 and 'xmlns="http://www.w3.org/2000/svg"' in svg
    # Still complete when moved away from its figure files.
    moved = tmp_path / "moved.html"
    shutil.copy(r.report_html, moved)
    assert moved.read_text() == text


def test_cached_dataset_is_reused(crash_inputs, tmp_path):
    out = tmp_path / "report"
    postmortem(crash_inputs, out)
    meta = out / ".dataset" / "_meta.json"
    first = meta.stat().st_mtime_ns
    postmortem(crash_inputs, out)
    assert meta.stat().st_mtime_ns == first
    crash_inputs[0].write_text(crash_log(0) + "\n")   # changed input: ingested again
    postmortem(crash_inputs, out)
    assert meta.stat().st_mtime_ns != first


# --- exit statuses ---------------------------------------------------------------------------------

def _cli(args):
    return CliRunner().invoke(cli, ["postmortem", *map(str, args)])


def test_exit_1_crash_explained_via_cli(crash_inputs, tmp_path):
    res = _cli([*crash_inputs, "-o", tmp_path / "r"])
    assert res.exit_code == 1, res.output
    assert "entry-assert on rank 0, iteration 2" in res.output
    assert "rank0.log:4" in res.output
    assert "report.html" in res.output and "What to do:" in res.output


def test_timings_name_every_phase_and_the_stages_that_ran(crash_inputs, tmp_path):
    out = tmp_path / "times.json"
    res = _cli([*crash_inputs, "-o", tmp_path / "r", "-q", "--timings", out])
    assert res.exit_code == 1, res.output
    t = json.loads(out.read_text())
    assert list(t["phases"]) == ["ingest", "crash signatures", "replay", "verdicts", "figures",
                                 "timeline", "report"]
    # a log and a trace were read; one window replayed in memory (no frames stage streamed)
    assert {"log read", "trace read", "dataset write"} <= set(t["stages"])
    # the logs' crash signatures are read on a thread beside the replay: a stage, one block
    assert t["stages"]["crash signatures"]["blocks"] == 1
    # the story's timeline is built beside the figures: a stage of its own, one block
    assert t["stages"]["timeline"]["blocks"] == 1
    for rec in t["phases"].values():
        assert rec["wall"] >= 0 and rec["cpu"] >= 0
    assert not (tmp_path / "r" / "times.json").exists()


def test_exit_0_clean_trace(tmp_path):
    trace = write_trace(tmp_path / "clean.jsonl", CLEAN_FRAMES)
    r = postmortem([trace], tmp_path / "r")
    assert r.exit_status == 0, r.status_reason
    assert {v.verdict for v in r.verdicts} == {"clean"}
    assert _cli([trace, "-o", tmp_path / "r2", "-q"]).exit_code == 0


def test_exit_2_bad_input(tmp_path):
    res = _cli([tmp_path / "missing.log", "-o", tmp_path / "r"])
    assert res.exit_code == 2
    assert "missing.log" in res.output
    with pytest.raises(ForensicsError):
        postmortem([tmp_path / "missing.log"], tmp_path / "r")
    res = _cli([tmp_path / "missing.log", "-o", tmp_path / "r", "--policy", "no-such-policy"])
    assert res.exit_code == 2


def test_exit_2_nothing_usable(tmp_path):
    log = tmp_path / "chatter.log"
    log.write_text("hello\nnothing to see here\n")
    r = postmortem([log], tmp_path / "r")
    assert r.exit_status == 2 and "nothing usable" in r.status_reason


def test_exit_3_logs_without_traces(tmp_path):
    log = tmp_path / "rank0.log"
    log.write_text(crash_log(0))
    r = postmortem([log], tmp_path / "r")
    assert r.exit_status == 3
    assert "no request traces" in r.status_reason
    assert r.verdicts == ()
    assert r.log_crash.rank == 0 and r.log_crash.iter == 2
    assert "ADP_FORENSICS_TRACE_DIR" in r.next_step and "TLLM_PROFILE_LOG_RANKS=all" in r.next_step
    assert any("ADP_FORENSICS_TRACE_DIR" in m for m in r.logs_only.missing)
    res = _cli([log, "-o", tmp_path / "r2"])
    assert res.exit_code == 3
    assert "From the logs alone" in res.output and "no request traces" in res.output


def test_exit_3_no_policy_reproduces(tmp_path):
    """The log blames rank 1, but every replay that crashes crashes on rank 0 (conftest)."""
    d = tmp_path / "in"
    d.mkdir()
    write_trace(d / "trace.jsonl", CRASH_FRAMES)
    (d / "rank1.log").write_text(crash_log(1))
    r = postmortem([d], tmp_path / "r")
    assert r.exit_status == 3
    assert "no policy reproduces" in r.status_reason
    assert "prefix-2026 crashes at iteration 2 on rank 0" in r.status_reason


def test_policy_option_limits_the_replay(crash_inputs, tmp_path):
    r = postmortem(crash_inputs, tmp_path / "r", policies=["fix-16161"])
    assert [v.policy for v in r.verdicts] == ["fix-16161"]
    assert r.exit_status == 3   # the only policy replayed does not crash like the logs


# --- real logs and bundled samples ----------------------------------------------------------------

@pytest.mark.parametrize("name", ["trtllm_pr_16161.txt", "trtllm_pr_17278.txt"])
def test_real_abridged_assert(shared_logs, tmp_path, name):
    """Author-abridged tracebacks (no line number, no rank): an entry assert that only builds
    with an assert, a cap and a leaking path produce; no traces, so not explained (3)."""
    r = postmortem([shared_logs / name], tmp_path / "r")
    assert r.log_crash is not None and r.log_crash.kind.value == "entry-assert"
    assert r.log_crash.rank is None and r.log_crash.iter is None
    assert "prefix-2026" in r.log_crash.policies
    assert "tolerant-17278" not in r.log_crash.policies
    assert r.exit_status == 3
    assert r.report_html.stat().st_size > 1000


def test_real_mpi_abort_alone_is_unexplained(shared_logs, tmp_path):
    r = postmortem([shared_logs / "trtllm_issue_3736.txt"], tmp_path / "r")
    assert r.log_crash.kind.value == "mpi-abort"
    assert r.exit_status == 3 and "no pad-dummy signature" in r.status_reason


def _sample(name: str) -> Path:
    p = SAMPLES / name
    if not p.is_dir():
        pytest.skip(f"bundled sample {name} is absent")
    return p


def test_bundled_nvbug_sample(tmp_path):
    """The README's main command: the simulated NVBug 6438685 run crashes under prefix-2026."""
    sample = _sample("nvbug-6438685")
    res = _cli([sample, "-o", tmp_path / "report"])
    assert res.exit_code == 1, res.output
    f = json.loads((tmp_path / "report" / "findings.json").read_text())
    assert f["policies"]["prefix-2026"]["crash"] is not None
    assert f["policies"]["prefix-2026"]["leaks"]
    assert str(tmp_path / "report" / "report.html") in res.output.splitlines()[-1]
    figures = sorted((tmp_path / "report").glob("*.svg"))
    assert len(figures) == 3 and not list((tmp_path / "report").glob("*.png"))
    for svg in figures:
        assert ET.fromstring(svg.read_bytes()).tag == SVG_ROOT


def test_bundled_healthy_sample_exits_0(tmp_path):
    r = postmortem([_sample("healthy")], tmp_path / "r")
    assert r.exit_status == 0, r.status_reason
    assert r.log_crash is None and {v.verdict for v in r.verdicts} == {"clean"}


def test_bundled_surplus_sample_warnings_matched(tmp_path):
    """A tolerant build warns instead of asserting; its own replay warns about the same ranks
    and counts, an asserting build would have crashed instead."""
    r = postmortem([_sample("surplus-17278")], tmp_path / "r")
    assert r.exit_status == 1 and r.log_crash is None
    v = {x.policy: x for x in r.verdicts}
    assert v["tolerant-17278"].is_recording_build
    assert v["tolerant-17278"].reproduces_log_warnings is True
    assert v["prefix-2026"].reproduces_log_warnings is False
    assert {s.kind.value for s in r.signatures} == {"surplus-warning"}
    assert all(s.policies == ("tolerant-17278", "sched-aware-16921", "postpad-17379", "newest",
                              "kv-connector-19164", "dkv") for s in r.signatures)


def test_logs_alone_agree_with_the_replay(nvbug_report, tmp_path):
    """On the bundled NVBug run every rank logs its batch size, so the fleet-wide skips read from
    the logs alone must be exactly the replayed skips (can_queue False with work pending) of the
    build that recorded it. The logs alone show the chain (the skip at 75 with rank 2 busy,
    the assert on rank 2 at 76), so the crash is explained (1) without the trace."""
    sample = _sample("nvbug-6438685")
    prefix = nvbug_report.findings["policies"]["prefix-2026"]
    logs = postmortem([sample / "executor.log"], tmp_path / "logs")
    assert logs.exit_status == 1 and "NVBug 6438685 chain" in logs.status_reason
    skips = [s.iter for s in logs.logs_only.fleet_skips]
    assert skips and skips[0] == prefix["leaks"][0]["iter_skipped"]
    assert set(skips) == {leak["iter_skipped"] for leak in prefix["leaks"]}
    assert logs.log_crash.iter == prefix["crash"]["iter"] and logs.log_crash.rank == prefix["crash"]["rank"]
    p = _Refs()
    p.feed(logs.report_html.read_text())
    assert p.imgs == 1 and all(x.startswith(("data:image/svg+xml;base64,", "#")) for x in p.refs)


def test_progress_and_several_runs(tmp_path):
    """Two traced runs: the first (by run record order) is the story, both are replayed."""
    import json as _json
    a = write_trace(tmp_path / "a.jsonl", CRASH_FRAMES)
    b = tmp_path / "b.jsonl"
    lines = a.read_text().splitlines()
    rec = _json.loads(lines[0])
    rec["run_id"] = "other"
    b.write_text("\n".join([_json.dumps(rec), *lines[1:]]) + "\n")
    seen: list[str] = []
    r = postmortem([a, b], tmp_path / "r", progress=seen.append)
    assert seen[0] == "ingesting inputs" and seen[-1] == "writing the report"
    replaying = [m for m in seen if m.startswith("replaying")]
    # one pass per run over its iteration windows, every policy at once
    assert [m.split()[1] for m in replaying] == ["hand", "other"]
    assert all("12 policies" in m for m in replaying)
    assert sorted(r.findings["runs"]) == ["hand", "other"]
    assert r.findings["runs"]["other"]["policies"]["prefix-2026"]["crash"]["iter"] == 2


def test_report_inside_the_input_directory(crash_inputs, tmp_path):
    """`postmortem in/ -o in/report` twice: the second run must not ingest findings.json."""
    d = crash_inputs[0].parent
    first = postmortem([d], d / "report")
    second = postmortem([d], d / "report")
    assert first.exit_status == second.exit_status == 1
    assert [i[0] for i in second.summary.inputs] == [i[0] for i in first.summary.inputs]


def test_exit_2_refused_input_still_reports(crash_inputs, tmp_path):
    """A binary file among good inputs: the report is written, the status says what was refused."""
    binary = crash_inputs[0].parent / "core.log"
    binary.write_bytes(bytes(range(256)) * 64)
    r = postmortem([*crash_inputs, binary], tmp_path / "r")
    assert r.exit_status == 2 and "core.log" in r.status_reason
    assert r.report_html.is_file() and r.log_crash is not None


def test_story_policy_prefers_the_policy_that_reproduces_the_logged_crash():
    """The report and notebooks tell one story: reproduction of the logged crash first (the
    recording build among those), then the recording build if it fails, then any crash, any leak."""
    from types import SimpleNamespace as V

    from forensics.verdicts import story_policy
    rows = [V(policy="a", verdict="leak", reproduces_log_crash=False, is_recording_build=True),
            V(policy="b", verdict="crash", reproduces_log_crash=None, is_recording_build=False),
            V(policy="c", verdict="crash", reproduces_log_crash=True, is_recording_build=False)]
    assert story_policy(rows) == "c"
    rows[2].reproduces_log_crash = False
    assert story_policy(rows) == "a"          # the recording build leaks
    rows[0].verdict = "clean"
    assert story_policy(rows) == "b"          # else the first crash
    assert story_policy([V(policy="x", verdict="clean", reproduces_log_crash=None,
                           is_recording_build=True)]) is None


def test_streamed_and_in_memory_replays_write_the_same_report(nvbug_report, tmp_path):
    """A run of one window is replayed in memory, a longer one in windows through Parquet
    files (OUT/.replay); on the bundled NVBug run (77 iterations) windows of 16 iterations
    give the same findings, report and figures as the in-memory replay."""
    sample = _sample("nvbug-6438685")
    mem = nvbug_report
    win = postmortem([sample], tmp_path / "win", window=16)
    assert not (mem.out_dir / ".replay").exists()
    assert any((tmp_path / "win" / ".replay").rglob("decisions.parquet"))
    assert mem.exit_status == win.exit_status == 1
    strip = lambda d, root: json.dumps(d, sort_keys=True).replace(str(root), "OUT")
    assert strip(mem.findings, mem.out_dir) == strip(win.findings, tmp_path / "win")
    assert mem.report_md.read_text() == win.report_md.read_text()
    assert [p.read_bytes() for p in mem.figures] == [p.read_bytes() for p in win.figures]


def test_postmortem_goes_on_without_a_trace_broken_mid_file(crash_inputs, tmp_path):
    log, trace = crash_inputs
    lines = trace.read_text().splitlines(keepends=True)
    lines[2] = lines[2][:20] + " garbage\n"          # line 3 breaks the format
    trace.write_text("".join(lines))
    r = postmortem([log, trace], tmp_path / "r")
    assert r.exit_status == 2
    assert "trace.jsonl" in r.status_reason and "line 3" in r.status_reason
    findings = json.loads((tmp_path / "r" / "findings.json").read_text())
    assert r.log_crash is not None                   # the log was still read
    assert findings["exit_status"] == 2
