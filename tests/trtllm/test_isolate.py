"""``--isolate``: a ``trtllm:``/``py:`` policy's code in a confined child process (issue #25 item 7).

The stand-in namespace is not a sandbox: a pad body reaches ``os.system`` through
``().__class__.__base__.__subclasses__()`` (the ``_wrap_close`` class of ``os`` carries the
module's globals). Without ``--isolate`` that body creates a sentinel file (the documented risk);
with it, in a read-only mount namespace, it cannot. Verdicts are the same either way: the trace
of ``test_bisect`` (see its docstring: the 2026 build leaks rank 0's dummy at iter 0 and asserts
at iter 1, rank 0; the window fix neither leaks nor crashes) and the bundled nvbug sample.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from trtllm_checkouts import FIXTURES, RECORDS, place

from forensics.cli import cli
from forensics.errors import PolicyError
from replay import isolation
from replay.bisect import bisect
from replay.walk import run
from replay.frames import RunFrames
from replay.identify import identify
from replay.isolation import isolate_specs, isolated_policy, namespaces_available, runs_code
from replay.resolve import resolve_policy

REPO = Path(__file__).resolve().parents[2]
NVBUG = REPO / "traces" / "samples" / "nvbug-6438685"

needs_namespaces = pytest.mark.skipif(not namespaces_available(),
                                      reason="no unprivileged user namespaces (unshare) here")


def _hostile_executor(sentinel: Path) -> str:
    """The 2026 executor whose pad method first runs ``touch SENTINEL`` through the escape."""
    text = (FIXTURES / "py_executor_2026.py").read_text()
    head = text.index("def _pad_attention_dp_dummy_request(self")
    body = text.index(":\n", head) + 2
    indent = " " * (len(text[body:]) - len(text[body:].lstrip(" ")))
    escape = textwrap.indent(textwrap.dedent(f"""\
        for cls in ().__class__.__base__.__subclasses__():
            if cls.__name__ == "_wrap_close":
                cls.__init__.__globals__["system"]("touch {sentinel}")
                break
        """), indent)
    return text[:body] + escape + text[body:]


@pytest.fixture
def frames():
    return RunFrames.from_records(RECORDS)


@pytest.fixture
def hostile(tmp_path):
    sentinel = tmp_path / "written-by-the-pad-body"
    root = place(tmp_path / "src", "2026", executor_text=_hostile_executor(sentinel))
    return f"trtllm:{root}", sentinel


def test_without_isolate_the_escape_writes_the_sentinel(frames, hostile):
    """The documented risk: the stand-in namespace does not stop the body."""
    spec, sentinel = hostile
    run(frames, policy=spec)
    assert sentinel.exists()


@needs_namespaces
def test_under_isolate_the_escape_cannot_write(frames, hostile):
    spec, sentinel = hostile
    policy = isolated_policy(spec)
    assert policy.isolation.startswith("namespaces: no network")
    result = run(frames, policy=policy)
    assert not sentinel.exists()
    # The body ran (its os.system failed), and the 2026 code decided as it does without it.
    assert [(lk.rank, lk.iter_created, lk.iter_skipped) for lk in result.leak_records] == [(0, 0, 0)]
    assert (result.crash.iter, result.crash.rank) == (1, 0)


@needs_namespaces
def test_cli_replay_isolate_leaves_no_sentinel(tmp_path, hostile):
    spec, sentinel = hostile
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    res = subprocess.run([sys.executable, "-m", "forensics", "replay", str(trace), "--policy",
                          spec, "--isolate", "--json"], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert res.returncode == 1, res.stderr
    assert json.loads(res.stdout)["policies"][spec]["verdict"] == "crash"
    assert not sentinel.exists()


@needs_namespaces
def test_isolated_child_has_no_network_a_read_only_file_system_and_no_signals(tmp_path):
    import errno
    assert errno.EROFS == 30
    """A py: candidate reporting what it can do from inside, through its warnings."""
    probe = tmp_path / "probe.py"
    target = tmp_path / "must-not-exist"
    probe.write_text(textwrap.dedent(f"""\
        import os, socket

        def count_probe(self):
            try:
                open({str(target)!r}, "w").close()
                wrote = "wrote"
            except OSError as e:
                wrote = "refused " + str(e.errno)
            try:
                socket.create_connection(("1.1.1.1", 53), timeout=2).close()
                net = "connected"
            except OSError:
                net = "no network"
            try:
                os.kill({os.getpid()}, 0)
                signal = "can signal the tool"
            except ProcessLookupError:
                signal = "no such process"
            self.logger.warning(wrote + "; " + net + "; " + signal)
            return len(self.active_requests)
        """))
    policy = isolated_policy(f"py:{probe}:count_probe:count:prefix-2026")
    outcome = policy.pad_hook(_view())
    assert not target.exists()
    assert outcome.warnings == ("refused 30; no network; no such process",)  # EROFS


def _view():
    from replay.config import RunConfig
    from replay.policy import FrameView
    return FrameView(iter=0, rank=0, requests=((1, 0, False),), expected=1,
                     config=RunConfig(tp_size=2, disaggregated=True))


@pytest.mark.parametrize("era", ["2026", "fix16161", "17278"])
def test_verdicts_identical_with_and_without_isolate(frames, tmp_path, era):
    spec = f"trtllm:{place(tmp_path / era, era)}"
    plain, isolated = run(frames, policy=spec), run(frames, policy=isolated_policy(spec))
    assert isolated.verdict == plain.verdict
    assert isolated.leaks.equals(plain.leaks)
    assert (isolated.crash is None) == (plain.crash is None)
    assert isolated.read_decisions().equals(plain.read_decisions())


def test_rlimits_fallback_gives_the_same_verdicts(frames, tmp_path, monkeypatch):
    """Where namespaces are missing, the child runs under rlimits; the verdicts do not change."""
    monkeypatch.setattr(isolation, "namespaces_available", lambda: False)
    spec = f"trtllm:{place(tmp_path / 'src', '2026')}"
    policy = isolated_policy(spec)
    assert policy.isolation.startswith("rlimits")
    assert run(frames, policy=policy).leaks.equals(run(frames, policy=spec).leaks)


def test_candidate_verdicts_identical_and_prints_do_not_break_the_channel(frames, tmp_path):
    fix = tmp_path / "fix.py"
    fix.write_text(textwrap.dedent("""\
        print("imported")   # to stdout: must not reach the replay's channel

        def count_in_window(self):
            print("counting")
            if self.kv_cache_transceiver is None:
                return len(self.active_requests)
            low, high = self.scheduler.scheduling_state_range
            return sum(1 for r in self.active_requests if int(low) <= r.state_value < int(high))
        """))
    spec = f"py:{fix}:count_in_window:count:prefix-2026"
    plain, isolated = run(frames, policy=spec), run(frames, policy=isolated_policy(spec))
    assert (plain.verdict, isolated.verdict) == ("clean", "clean")
    assert isolated.read_decisions().equals(plain.read_decisions())


def test_child_errors_come_back_as_policy_errors(tmp_path):
    with pytest.raises(PolicyError, match="no such directory"):
        isolated_policy(f"trtllm:{tmp_path / 'missing'}")


def test_isolate_specs_leaves_catalogue_names(tmp_path):
    spec = f"trtllm:{place(tmp_path / 'src', '2026')}"
    out = isolate_specs(["prefix-2026", spec])
    assert out[0] == "prefix-2026" and out[1].name == spec and out[1].isolation
    assert isolate_specs(None) is None
    assert runs_code("py:x.py:f") and runs_code(spec) and not runs_code("newest")


def test_identify_and_bisect_agree_under_isolate(frames, tmp_path, git_repo):
    spec = f"trtllm:{place(tmp_path / 'src', '17278')}"
    assert identify(isolated_policy(spec)).to_json() == identify(spec).to_json()
    good = git_repo.commit_era("2026", "pre-fix executor")
    fix = git_repo.commit_era("fix16161", "the window predicate")
    bad = git_repo.commit_unrelated("NOTES", "y\n")
    plain = bisect(frames, git_repo.root, good, bad)
    isolated = bisect(frames, git_repo.root, good, bad, isolate=True)
    assert plain.first_change.revision == isolated.first_change.revision == fix


def test_postmortem_isolate_same_findings_on_the_bundled_sample(tmp_path):
    if not NVBUG.is_dir():
        pytest.skip("bundled samples absent")
    spec = f"trtllm:{place(tmp_path / 'src', '2026')}"
    out, codes = {}, {}
    for flag in ([], ["--isolate"]):
        res = CliRunner().invoke(cli, ["postmortem", str(NVBUG), "-o", str(tmp_path / f"r{len(flag)}"),
                                       "--policy", spec, "--policy", "fix-16161", "--json", *flag])
        assert res.exit_code in (1, 3), res.output
        codes[bool(flag)], out[bool(flag)] = res.exit_code, json.loads(res.output)
    assert codes[True] == codes[False]
    for key in ("exit_status", "status_reason", "next_step", "policies", "identified", "chain"):
        assert out[True].get(key) == out[False].get(key), key


def test_every_frame_and_outcome_field_crosses_to_the_child():
    """A field added to FrameView or PadOutcome must cross too (or the verdicts could differ)."""
    import dataclasses
    from replay.config import RunConfig
    from replay.isolation import frame_from_json, frame_to_json, outcome_from_json, outcome_to_json
    from replay.policy import FrameView, PadOutcome
    view = FrameView(iter=7, rank=3, requests=((1, 4, False), (-1, 9, True)), expected=2,
                     config=RunConfig(tp_size=4, disaggregated=True, model_arch="deepseek_v4"),
                     **{f.name: not f.default if isinstance(f.default, bool) else 5
                        for f in dataclasses.fields(FrameView) if f.name not in
                        ("iter", "rank", "requests", "expected", "config")})
    assert frame_from_json(json.loads(json.dumps(frame_to_json(view)))) == view
    out = PadOutcome(padded=True, role="context", alloc_failed=True, crash="AssertionError: x",
                     surplus_warning=True, warnings=("w1", "w2"))
    assert outcome_from_json(json.loads(json.dumps(outcome_to_json(out))), "t") == out
    assert {f.name for f in dataclasses.fields(PadOutcome)} == set(outcome_to_json(out))
