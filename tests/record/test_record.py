"""The live recorder: .pth hook, wrappers, end-to-end runs of a stand-in executor.

The stand-in ``tensorrt_llm`` package (``fixtures/``) is our own code in the upstream shape. The
end-to-end tests start one process per rank; each processes the recorder's ``.pth`` file with
``site.addsitedir`` -- the function ``site`` runs at start-up for every site directory, reading
its ``.pth`` files the same way -- so the real site-packages is never touched. One test also goes
through real interpreter start-up (``PYTHONUSERBASE`` points the user site at a temp directory).
"""
from __future__ import annotations

import importlib.util
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import pytest
from click.testing import CliRunner

from forensics.cli import cli
from replay.states import CURRENT_NUMBERING
from forensics.record import bootstrap, capture, install, run_facts, writer

FIXTURES = Path(__file__).resolve().parent / "fixtures"
STANDIN = FIXTURES / "tensorrt_llm" / "_torch" / "pyexecutor" / "py_executor.py"
DRIVER = FIXTURES / "run_standin.py"
# Process the .pth files of argv[1] as start-up does, then run argv[2:] as a script.
CHILD = ("import site, sys; site.addsitedir(sys.argv[1]); import runpy; sys.argv = sys.argv[2:]; "
         "runpy.run_path(sys.argv[0], run_name='__main__')")

# NVBug 6438685 in three ranks (tp 3, max_batch_size 2, so the cap is 2; disaggregated;
# non-overlap loop), prefix-2026 behaviour of the stand-in:
#   iter 0: counts [0,0,0] + 5 new -> expected = min(max(ceil(5/3)=2, 0), 2) = 2.
#     rank 0 holds 1,2 (GEN_IN_PROGRESS)      -> counted 2, no dummy, batch 2
#     rank 1 holds 3,4 (TRANS_IN_PROGRESS, 9) -> counted 0, dummy appended, batch 1 (the dummy)
#     rank 2 holds 5 (GENERATION_TO_COMPLETE) -> counted 1 (legacy), no dummy, batch 0
#     sizes [2,1,0] contain 0 -> can_queue False on every rank: nothing runs, the dummy stays.
#   iter 1: counts [2,3,1] -> expected = min(max(ceil(6/3)=2, 3), 2) = 2 (cap applied last)
#     rank 1 holds 3 > 2 -> the entry assert fires; ranks 0 and 2 pass their pad step and block in
#     _can_queue's all-gather (rank 2 then fails on the abort, rank 0 is killed with SIGTERM).
CRASH = {"tp_size": 3, "max_batch_size": 2, "disaggregated": True, "overlap": False,
         "iterations": 4,
         "arrivals": {"0": {"0": [[1, 13], [2, 13]], "1": [[3, 9], [4, 9]], "2": [[5, 14]]}}}

# A run that ends normally (same fleet, prefix-2026 stand-in):
#   iter 0: counts [0,0,0] + 3 new -> expected 1. r0 {1:10}, r1 {2:8} -> dummy, r2 {3:13}.
#           batches [1,1,1] -> can_queue; 1 becomes 13; r1's dummy is last -> removed.
#   iter 1: 2 -> 12 (KV received), 4 arrives on r2. counts [1,1,1] + 1 -> expected 2.
#           batches [1,1,2] -> can_queue; 4 becomes 13; 3 finishes and is removed.
#   iter 2: counts [1,1,1] -> expected 1. batches [1,1,1]; 1 and 2 finish.
#   iter 3: counts [0,0,1] -> expected 1. r0 {} and r1 {} get a dummy, batches [1,1,1];
#           each dummy is last and removed.
HEALTHY = {"tp_size": 3, "max_batch_size": 2, "disaggregated": True, "overlap": False,
           "iterations": 4, "model_type": "deepseek_v4",
           "arrivals": {"0": {"0": [[1, 10]], "1": [[2, 8]], "2": [[3, 13]]},
                        "1": {"2": [[4, 10]]}},
           "transitions": {"1": {"2": 12}},
           "finish": {"1": [3], "2": [1, 2]}}


def _f(it, reqs, expected, padded, scheduled=None, can_queue=None):
    out = {"kind": "frame", "iter": it, "requests": reqs, "expected": expected, "padded": padded}
    if scheduled is not None:
        out["scheduled"] = scheduled
    if can_queue is not None:
        out["can_queue"] = can_queue
    return out


def _r(i, s, dummy=False):
    return {"id": i, "state": s, **({"dummy": True} if dummy else {})}


# -- helpers -------------------------------------------------------------------------------------

@pytest.fixture
def site_dir(tmp_path):
    d = tmp_path / "site"
    d.mkdir()
    install.install(d)
    return d


def _env(trace_dir=None, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADP_FORENSICS")}
    if trace_dir is not None:
        env["ADP_FORENSICS_TRACE_DIR"] = str(trace_dir)
    env.update(extra)
    return env


def _spawn(site, scenario_path, rank, rendezvous, trace_dir, on_abort="raise", **extra):
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(site), str(DRIVER), str(scenario_path), str(rank),
         str(rendezvous), on_abort],
        env=_env(trace_dir, ADP_FORENSICS_BUILD="prefix-2026", **extra),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _records(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def _frames(path):
    return [{k: v for k, v in r.items() if k != "rank"} for r in _records(path)
            if r["kind"] == "frame"]


def _load_standin():
    """The stand-in module under a private name (``tensorrt_llm`` stays out of sys.modules)."""
    spec = importlib.util.spec_from_file_location("adp_record_standin", STANDIN)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _ingest(trace_dir, tmp_path):
    """The documented path: ``forensics ingest DIR`` then the run's frames for replay."""
    import forensics
    import replay
    forensics.ingest([trace_dir], tmp_path / "run.ds")
    ds = forensics.load(tmp_path / "run.ds")
    return ds, replay.RunFrames.from_dataset(ds)


@pytest.fixture
def patched(tmp_path):
    """The stand-in loaded in-process with its PyExecutor wrapped, recording into tmp/traces."""
    mod = _load_standin()
    trace_dir = tmp_path / "traces"
    saved = dict(capture._config)
    capture.configure(str(trace_dir))
    capture._config["executors"] = 0
    bootstrap.patch_class(mod.PyExecutor)
    yield mod, trace_dir
    bootstrap.unpatch_class(mod.PyExecutor)
    capture._config.clear()
    capture._config.update(saved)


def _one_rank(mod, scenario):
    return mod.PyExecutor(mod.Distributed(0, 1), scenario)


# -- the .pth file -------------------------------------------------------------------------------

_PROBE = ("import sys; before = set(sys.modules); import site; site.addsitedir(sys.argv[1]); "
          "new = sorted(m for m in set(sys.modules) - before if m.startswith('forensics')); "
          "sys.path.insert(0, sys.argv[2]); "
          "from tensorrt_llm._torch.pyexecutor.py_executor import PyExecutor as P; "
          "print(new); print(sorted(n for n in vars(P) if hasattr(getattr(P, n), "
          f"{capture.ORIGINAL_ATTR!r})))")


def test_pth_without_variable_imports_nothing_and_wraps_nothing(site_dir):
    out = subprocess.run([sys.executable, "-c", _PROBE, str(site_dir), str(FIXTURES)],
                         env=_env(), capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["[]", "[]"], out.stderr


def test_pth_with_variable_wraps_the_executor(site_dir, tmp_path):
    out = subprocess.run([sys.executable, "-c", _PROBE, str(site_dir), str(FIXTURES)],
                         env=_env(tmp_path / "t"), capture_output=True, text=True, check=True)
    new, wrapped = out.stdout.splitlines()
    assert "forensics.record.bootstrap" in new
    assert wrapped == str(["_can_queue", "_pad_attention_dp_dummy_request", "_schedule"])


def test_pth_line_is_one_import_line_checking_the_environment_first():
    line = install.pth_line()
    assert line.count("\n") == 1 and line.startswith("import os; os.environ.get(")
    ns: dict = {}
    saved = os.environ.pop("ADP_FORENSICS_TRACE_DIR", None)
    try:
        before = set(sys.modules)
        exec(line, ns)
        assert set(sys.modules) == before
    finally:
        if saved is not None:
            os.environ["ADP_FORENSICS_TRACE_DIR"] = saved


def test_a_pth_that_cannot_import_the_recorder_never_stops_the_interpreter(tmp_path):
    site_d = tmp_path / "site"
    site_d.mkdir()
    (site_d / install.PTH_NAME).write_text(install.pth_line(tmp_path / "nowhere"))
    # -I -S: no site-packages, no PYTHONPATH, no cwd: nothing can provide forensics.
    out = subprocess.run([sys.executable, "-I", "-S", "-c",
                          "import site, sys; site.addsitedir(sys.argv[1]); print('alive')",
                          str(site_d)], cwd=tmp_path, env=_env(tmp_path / "t"),
                         capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout == "alive\n"
    assert out.stderr.startswith("adp-forensics: recorder not installed: ModuleNotFoundError")


# -- end to end: three ranks ---------------------------------------------------------------------

def test_three_ranks_record_a_run_that_ingests_and_replays(site_dir, tmp_path):
    import replay
    scen = tmp_path / "healthy.json"
    scen.write_text(json.dumps(HEALTHY))
    rv, traces = tmp_path / "rv", tmp_path / "traces"
    rv.mkdir()
    procs = [_spawn(site_dir, scen, r, rv, traces) for r in range(3)]
    for p in procs:
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
    assert sorted(p.name for p in traces.iterdir()) == ["rank-0.jsonl", "rank-1.jsonl",
                                                        "rank-2.jsonl"]
    run = _records(traces / "rank-1.jsonl")[0]
    assert {k: run[k] for k in ("kind", "format", "version", "tp_size", "pp_size",
                                "max_batch_size", "max_num_active_requests", "disaggregated",
                                "overlap_scheduler", "build", "rank",
                                "enable_attention_dp", "model_arch")} == {
        "kind": "run", "format": "adp-trace", "version": 2, "tp_size": 3, "pp_size": 1,
        "max_batch_size": 2, "max_num_active_requests": 2, "disaggregated": True,
        "overlap_scheduler": False, "build": "prefix-2026", "rank": 1,
        "enable_attention_dp": True, "model_arch": "deepseek_v4"}
    # The frames' integer states are the live enum's: the run record declares its table.
    assert run["state_numbering"]["CONTEXT_INIT"] == 10 and "guessed" not in run
    start = _records(traces / "rank-1.jsonl")[1]
    assert (start["kind"], start["global_rank"], start["pid"]) == ("note", 1, procs[1].pid)
    assert run["run_id"] == str(traces)
    assert _frames(traces / "rank-0.jsonl") == [
        _f(0, [_r(1, 10)], 1, False, 1, True), _f(1, [_r(1, 13)], 2, False, 1, True),
        _f(2, [_r(1, 13)], 1, False, 1, True), _f(3, [], 1, True, 1, True)]
    assert _frames(traces / "rank-1.jsonl") == [
        _f(0, [_r(2, 8)], 1, True, 1, True), _f(1, [_r(2, 12)], 2, False, 1, True),
        _f(2, [_r(2, 12)], 1, False, 1, True), _f(3, [], 1, True, 1, True)]
    assert _frames(traces / "rank-2.jsonl") == [
        _f(0, [_r(3, 13)], 1, False, 1, True), _f(1, [_r(3, 13), _r(4, 10)], 2, False, 2, True),
        _f(2, [_r(4, 13)], 1, False, 1, True), _f(3, [_r(4, 13)], 1, False, 1, True)]

    ds, frames = _ingest(traces, tmp_path)
    assert len(ds.table("frames")) == 12 and len(ds.table("runs")) == 3
    res = replay.run(frames, policy="prefix-2026")
    assert res.crash is None and res.leaks.empty and res.first_divergence is None


def _wait_for(path, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


@pytest.mark.parametrize("overlap", [False, True])
def test_crash_leaves_the_crashing_iteration_on_disk(site_dir, tmp_path, overlap):
    """Same chain under either loop: in the overlap loop rank 2 (batch 0) processes its previous
    batch while rank 1 (batch 1, the dummy) does not, so the dummy survives there too."""
    import replay
    scen = tmp_path / "crash.json"
    scen.write_text(json.dumps({**CRASH, "overlap": overlap}))
    rv, traces = tmp_path / "rv", tmp_path / "traces"
    rv.mkdir()
    # Rank 0 waits in its all-gather like an MPI rank until "mpirun" SIGTERMs it; rank 2 fails.
    procs = [_spawn(site_dir, scen, 0, rv, traces, "wait"),
             _spawn(site_dir, scen, 1, rv, traces), _spawn(site_dir, scen, 2, rv, traces)]
    _, err1 = procs[1].communicate(timeout=60)
    assert procs[1].returncode == 1 and "AssertionError" in err1
    procs[2].communicate(timeout=60)
    assert procs[2].returncode == 1
    _wait_for(rv / "ag-3-0")  # rank 0 is inside _can_queue of iteration 1, its frame pending
    procs[0].send_signal(signal.SIGTERM)
    procs[0].communicate(timeout=60)
    assert procs[0].returncode == -signal.SIGTERM

    assert _frames(traces / "rank-1.jsonl") == [
        _f(0, [_r(3, 9), _r(4, 9)], 2, True, 1, False),
        {"kind": "frame", "iter": 1, "expected": 2,
         "requests": [_r(3, 9), _r(4, 9), _r(0, 13, dummy=True)]}]
    notes = [r for r in _records(traces / "rank-1.jsonl") if r["kind"] == "note"][1:]
    assert [n["message"] for n in notes] == [
        "AssertionError raised in _pad_attention_dp_dummy_request: "]
    assert (notes[0]["iter"], notes[0]["expected"], notes[0]["active"]) == (1, 2, 3)
    assert _frames(traces / "rank-0.jsonl") == [
        _f(0, [_r(1, 13), _r(2, 13)], 2, False, 2, False),
        _f(1, [_r(1, 13), _r(2, 13)], 2, False, 2)]   # SIGTERM flush: no can_queue yet
    assert _frames(traces / "rank-2.jsonl") == [
        _f(0, [_r(5, 14)], 2, False, 0, False), _f(1, [_r(5, 14)], 2, False, 0)]

    _, frames = _ingest(traces, tmp_path)
    assert frames.config.overlap_scheduler is overlap
    res = replay.run(frames, policy="prefix-2026")
    assert (res.crash.iter, res.crash.rank) == (1, 1)
    assert res.first_divergence is None
    assert [(lk.rank, lk.iter_created, lk.cause_ranks) for lk in res.leak_records] == [(1, 0, (2,))]


def test_real_interpreter_startup_processes_the_pth(tmp_path):
    """PYTHONUSERBASE makes ``site`` itself process our .pth at start-up (user site first, so the
    line's fallback ``sys.path`` entry is what finds the package)."""
    env = _env(tmp_path / "traces", PYTHONUSERBASE=str(tmp_path / "userbase"))
    probe = subprocess.run([sys.executable, "-c",
                            "import site; print(site.ENABLE_USER_SITE); "
                            "print(site.getusersitepackages())"],
                           env=_env(PYTHONUSERBASE=str(tmp_path / "userbase")),
                           capture_output=True, text=True, check=True).stdout.split("\n")
    if probe[0] != "True":
        pytest.skip("user site-packages disabled in this interpreter (a venv?)")
    user_site = Path(probe[1])
    user_site.mkdir(parents=True)
    install.install(user_site)
    scen = tmp_path / "one.json"
    scen.write_text(json.dumps({"tp_size": 1, "max_batch_size": 4, "iterations": 2,
                                "arrivals": {"0": {"0": [[7, 10]]}}}))
    out = subprocess.run([sys.executable, str(DRIVER), str(scen), "0", str(tmp_path)],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert _frames(tmp_path / "traces" / "rank-0.jsonl") == [
        _f(0, [_r(7, 10)], 1, False, 1, True), _f(1, [_r(7, 13)], 1, False, 1, True)]


# -- in-process: wrappers, robustness ------------------------------------------------------------

def test_second_executor_in_a_process_writes_its_own_run(patched):
    mod, traces = patched
    scen = {"tp_size": 1, "iterations": 2, "arrivals": {"0": {"0": [[1, 10]]}}}
    _one_rank(mod, scen).event_loop()
    worker = threading.Thread(target=_one_rank(mod, scen).event_loop)  # upstream's loop thread
    worker.start()
    worker.join()
    writer.flush_all()
    first, second = _records(traces / "rank-0.jsonl"), _records(traces / "rank-0.exec2.jsonl")
    assert second[0]["run_id"] == first[0]["run_id"] + "#exec2"
    assert [f["iter"] for f in _frames(traces / "rank-0.jsonl")] == [0, 1]
    assert [f["iter"] for f in _frames(traces / "rank-0.exec2.jsonl")] == [0, 1]


def test_a_failing_capture_disables_itself_once_and_never_raises(patched, caplog, monkeypatch):
    mod, traces = patched

    def broken_capture(*args):
        raise RuntimeError("capture bug")

    monkeypatch.setattr(capture, "FrameRecord", broken_capture)   # any fault inside the capture
    ex = _one_rank(mod, {"tp_size": 1, "iterations": 3, "arrivals": {"0": {"0": [[5, 13]]}}})
    with caplog.at_level(logging.WARNING, logger="forensics.record.capture"):
        ex.event_loop()   # three pad steps run; none raises
    assert ex.iter_counter == 3
    writer.flush_all()
    recs = _records(traces / "rank-0.jsonl")
    assert [r["kind"] for r in recs] == ["run", "note", "note"]   # start note, then the failure
    assert recs[2]["message"] == ("recorder disabled: RuntimeError while capturing the frame at "
                                  "pad entry: capture bug")
    assert len([r for r in caplog.records if "recorder disabled" in r.getMessage()]) == 1


def test_requests_without_state_value_fall_back_to_the_state_enum(patched):
    mod, traces = patched

    class Old:  # an older request object: ``state`` enum only, no dummy flag
        def __init__(self, rid, state):
            self.py_request_id, self.state = rid, state

    ex = _one_rank(mod, {"tp_size": 1, "iterations": 0})
    ex.active_requests.append(Old(9, mod.LlmRequestState.GENERATION_TO_COMPLETE))
    ex.expected_num_active_requests = 1
    ex._pad_attention_dp_dummy_request()
    writer.flush_all()
    recs = _records(traces / "rank-0.jsonl")
    assert recs[-1]["requests"] == [{"id": 9, "state": 14}]
    assert any(r["kind"] == "note" and "one by one" in r["message"] for r in recs)


def test_missing_methods_are_reported_once_and_the_rest_still_records(tmp_path, caplog):
    mod = _load_standin()
    ns = {n: getattr(mod.PyExecutor, n) for n in ("__init__", "_pad_attention_dp_dummy_request",
                                                   "_fetch_new_requests", "_apply_transitions",
                                                   "_executor_loop", "_executor_loop_overlap")}
    fake = types.ModuleType("fake_py_executor")
    fake.PyExecutor = type("PyExecutor", (), ns)    # a build without _schedule / _can_queue
    saved = dict(capture._config)
    bootstrap._state["trace_dir"] = str(tmp_path / "t")
    try:
        capture._config["executors"] = 0
        with caplog.at_level(logging.WARNING, logger="forensics.record.bootstrap"):
            assert bootstrap.patch_module(fake)
        ex = fake.PyExecutor(mod.Distributed(0, 1), {"tp_size": 1,
                                                     "arrivals": {"0": {"0": [[3, 13]]}}})
        ex._fetch_new_requests()
        ex._pad_attention_dp_dummy_request()
        writer.flush_all()
    finally:
        capture._config.clear()
        capture._config.update(saved)
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2 and "_schedule" in warned[0] and "_can_queue" in warned[1]
    recs = _records(tmp_path / "t" / "rank-0.jsonl")
    assert [r["kind"] for r in recs] == ["run", "note", "note", "note", "frame"]
    assert [r["message"][:40] for r in recs[2:4]] == [
        "not wrapped: PyExecutor._schedule does n", "not wrapped: PyExecutor._can_queue does "]
    assert recs[4]["requests"] == [{"id": 3, "state": 13}] and "can_queue" not in recs[4]


def test_run_record_reads_the_configuration_and_lists_what_it_guessed(patched):
    mod, _ = patched
    ex = mod.PyExecutor(mod.Distributed(2, 4), {"tp_size": 4, "max_batch_size": 16,
                                                 "overlap": True})
    rec = run_facts.run_record(ex, 2, 2, "r")
    assert (rec["tp_size"], rec["pp_size"], rec["max_batch_size"],
            rec["max_num_active_requests"], rec["disaggregated"], rec["overlap_scheduler"],
            "guessed" in rec) == (4, 1, 16, 16, False, True, False)
    assert rec["model_arch"] is None  # the scenario names no model
    assert rec["state_numbering"] == {s.name: s.value for s in mod.LlmRequestState}
    bare = run_facts.run_record(types.SimpleNamespace(), 0, 0, "r")
    assert bare["guessed"] == ["tp_size", "pp_size", "max_batch_size",
                               "max_num_active_requests", "disaggregated", "overlap_scheduler",
                               "state_numbering"]
    assert bare["state_numbering"] == run_facts.ASSUMED_NUMBERING == CURRENT_NUMBERING
    assert bare["model_arch"] is None


def test_an_older_enum_is_declared_so_its_integers_decode_right(patched):
    """A build whose LlmRequestState numbers states the older way (CONTEXT_INIT 2, ...): the
    recorder writes that table, so the reader maps the recorded ints to today's states."""
    import enum
    mod, _ = patched
    ex = mod.PyExecutor(mod.Distributed(0, 1), {"tp_size": 1, "model_type": "kimi_k2"})
    old = enum.Enum("LlmRequestState", {"CONTEXT_INIT": 2, "GENERATION_TO_COMPLETE": 5,
                                        "DISAGG_GENERATION_INIT": 7})
    fake = types.ModuleType("fake_old_executor")
    fake.LlmRequestState = old
    sys.modules["fake_old_executor"] = fake
    try:
        OldExecutor = type("PyExecutor", (), {"__module__": "fake_old_executor"})
        rec = run_facts.run_record(OldExecutor(), 0, 0, "r")
    finally:
        del sys.modules["fake_old_executor"]
    assert rec["state_numbering"] == {"CONTEXT_INIT": 2, "GENERATION_TO_COMPLETE": 5,
                                      "DISAGG_GENERATION_INIT": 7}
    assert run_facts.model_arch(ex) == "kimi_k2"
    from forensics.readers.trace_v1 import tables_from_records
    run = dict(rec, tp_size=1, pp_size=1, max_batch_size=1, max_num_active_requests=1,
               disaggregated=True, overlap_scheduler=True)
    t = tables_from_records([run, {"kind": "frame", "iter": 0, "rank": 0,
                                   "requests": [{"id": 1, "state": 7}, {"id": 2, "state": 5}]}], "m")
    assert t.requests.column("state_value").to_pylist() == [8, 14]
    assert t.requests.column("state").to_pylist() == ["DISAGG_GENERATION_INIT", "GENERATION_TO_COMPLETE"]


# -- CLI -----------------------------------------------------------------------------------------

def test_cli_install_status_uninstall(tmp_path):
    runner = CliRunner()
    site = str(tmp_path)
    res = runner.invoke(cli, ["record", "status", "--site-dir", site],
                           env={"ADP_FORENSICS_TRACE_DIR": None})
    assert res.exit_code == 0 and res.output.startswith("not installed")
    res = runner.invoke(cli, ["record", "install", "--site-dir", site])
    assert res.exit_code == 0 and (tmp_path / install.PTH_NAME).read_text() == install.pth_line()
    res = runner.invoke(cli, ["record", "status", "--site-dir", site],
                        env={"ADP_FORENSICS_TRACE_DIR": "/x"})
    assert res.output.splitlines() == [f"installed: {tmp_path / install.PTH_NAME}",
                                       "recording: on, traces go to /x"]
    res = runner.invoke(cli, ["record", "uninstall", "--site-dir", site])
    assert res.exit_code == 0 and not (tmp_path / install.PTH_NAME).exists()
    res = runner.invoke(cli, ["record", "install", "--site-dir", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "not a directory" in res.output


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_does_not_write_the_parents_buffer(patched, monkeypatch):
    mod, traces = patched
    monkeypatch.setattr(writer, "FLUSH_EVERY_SECONDS", 3600.0)
    ex = _one_rank(mod, {"tp_size": 1, "iterations": 2, "arrivals": {"0": {"0": [[1, 10]]}}})
    ex.event_loop()               # two frames buffered, not yet written
    pid = os.fork()
    if pid == 0:                  # the child exits through atexit-free _exit after a flush_all
        writer.flush_all()
        os._exit(0)
    os.waitpid(pid, 0)
    writer.flush_all()
    assert [f["iter"] for f in _frames(traces / "rank-0.jsonl")] == [0, 1]


# -- post-schedule pad (PR #17379) and refused dummy allocations ---------------------------------

@pytest.fixture
def patched_postpad(tmp_path, monkeypatch):
    """The stand-in built with ``_pad_empty_attention_dp_batch``, wrapped, recording into tmp."""
    monkeypatch.setenv("STANDIN_POSTPAD_17379", "1")
    mod = _load_standin()
    assert hasattr(mod.PyExecutor, capture.POSTPAD_METHOD)
    trace_dir = tmp_path / "traces"
    saved = dict(capture._config)
    capture.configure(str(trace_dir))
    capture._config["executors"] = 0
    wrapped, _ = bootstrap.patch_class(mod.PyExecutor)
    assert capture.POSTPAD_METHOD in wrapped
    yield mod, trace_dir
    bootstrap.unpatch_class(mod.PyExecutor)
    capture._config.clear()
    capture._config.update(saved)


# One aggregated rank (tp 1, max_batch_size 2, so the cap is 2), non-overlap, post-pad build:
#   iter 0: counts [0] + 1 new -> expected 1. Request 1 (CONTEXT_INIT) is counted (no
#     transceiver): no pad dummy. The capacity scheduler refuses it: batch 0. The post-pad step
#     sees an empty batch, 1 active < cap 2: a generation dummy, batch 1; can_queue True; the
#     dummy is last and removed. Frame: scheduled 1, postpadded true.
#   iter 1: expected 1; request 1 is scheduled (batch 1), no post-pad; it becomes 13.
#   iter 2: expected 1; request 1 refused again: batch 0; the post-pad allocation returns None
#     (alloc_fail) and is tolerated: batch 0, can_queue False. Frame: alloc_ok false.
POSTPAD_RUN = {"tp_size": 1, "max_batch_size": 2, "iterations": 3,
               "arrivals": {"0": {"0": [[1, 10]]}}, "refuse": {"0": [1], "2": [1]},
               "alloc_fail": {"2": [0]}}


def test_a_post_pad_build_records_postpadded_and_a_refused_allocation(patched_postpad, tmp_path):
    import replay
    mod, traces = patched_postpad
    ex = _one_rank(mod, POSTPAD_RUN)
    ex.event_loop()
    assert ex.iter_counter == 3
    assert "add_dummy_requests" not in vars(ex.kv_cache_manager)   # the shim never outlives a call
    writer.flush_all()
    assert _frames(traces / "rank-0.jsonl") == [
        dict(_f(0, [_r(1, 10)], 1, False, 1, True), postpadded=True),
        dict(_f(1, [_r(1, 10)], 1, False, 1, True), postpadded=False),
        dict(_f(2, [_r(1, 13)], 1, False, 0, False), postpadded=False, alloc_ok=False)]

    ds, frames = _ingest(traces, tmp_path)
    assert ds.frames["postpadded"].tolist() == [True, False, False]
    res = replay.run(frames, policy="postpad-17379")
    assert res.first_divergence is None and res.leaks.empty
    assert res.ledger[["iter_created", "origin", "iter_removed"]].values.tolist() == [
        [0, "postpad", 0]]


# As POSTPAD_RUN, but at iter 2 the KV-capacity precheck fails instead of the allocation:
#   iter 2: request 1 refused again, batch 0; _has_adp_dummy_kv_capacity returns False, so no
#     allocation is attempted: batch 0, can_queue False. Frame: kv_precheck_ok false (and no
#     alloc_ok: add_dummy_requests was never called).
PRECHECK_RUN = {**{k: v for k, v in POSTPAD_RUN.items() if k != "alloc_fail"},
                "no_capacity": {"2": [0]}}


def test_a_failed_kv_precheck_is_recorded_apart_from_a_refused_allocation(patched_postpad,
                                                                           tmp_path):
    import replay
    mod, traces = patched_postpad
    ex = _one_rank(mod, PRECHECK_RUN)
    ex.event_loop()
    assert capture.PRECHECK_METHOD not in vars(ex)       # the shim never outlives a call
    assert "add_dummy_requests" not in vars(ex.kv_cache_manager)
    writer.flush_all()
    assert _frames(traces / "rank-0.jsonl") == [
        dict(_f(0, [_r(1, 10)], 1, False, 1, True), postpadded=True),
        dict(_f(1, [_r(1, 10)], 1, False, 1, True), postpadded=False),
        dict(_f(2, [_r(1, 13)], 1, False, 0, False), postpadded=False, kv_precheck_ok=False)]
    ds, frames = _ingest(traces, tmp_path)
    assert ds.frames["kv_precheck_ok"].tolist()[2] is False
    assert frames.kv_precheck_ok.ravel().tolist() == [True, True, False]
    assert frames.alloc_ok.ravel().tolist() == [True, True, True]
    res = replay.run(frames, policy="postpad-17379")
    assert res.first_divergence is None and res.crash is None


def test_a_refused_pad_dummy_is_recorded_with_the_crashing_frame(patched, tmp_path):
    """Prefix-2026 stand-in, one disaggregated rank: request 1 awaits its KV (state 8, not
    counted), expected 1, so the pad step wants a dummy; add_dummy_requests returns None and the
    unchecked ``[0]`` raises TypeError. The frame is written with alloc_ok false (and no
    postpadded: this build has no post-schedule pad); replay reads it as the None crash."""
    import replay
    mod, traces = patched
    ex = _one_rank(mod, {"tp_size": 1, "max_batch_size": 2, "disaggregated": True,
                         "iterations": 2, "arrivals": {"0": {"0": [[1, 8]]}},
                         "alloc_fail": {"0": [0]}})
    with pytest.raises(TypeError):
        ex.event_loop()
    assert "add_dummy_requests" not in vars(ex.kv_cache_manager)
    writer.flush_all()
    assert _frames(traces / "rank-0.jsonl") == [
        {"kind": "frame", "iter": 0, "requests": [_r(1, 8)], "expected": 1, "alloc_ok": False}]
    _, frames = _ingest(traces, tmp_path)
    res = replay.run(frames, policy="prefix-2026")
    assert (res.crash.iter, res.crash.kind) == (0, "dummy_alloc_none")
    assert replay.run(frames, policy="fix-16161").crash is None


def test_a_manager_that_cannot_be_shimmed_is_noted_once_and_recording_goes_on(patched_postpad):
    mod, traces = patched_postpad

    class SlottedManager:  # like a binding object: no instance __dict__
        __slots__ = ("iteration",)

        def add_dummy_requests(self, request_ids, is_gen=True, **kwargs):
            return None

    ex = _one_rank(mod, POSTPAD_RUN)
    ex.kv_cache_manager = SlottedManager()
    ex.event_loop()   # the post-pad allocations return None, tolerated; nothing raises
    writer.flush_all()
    recs = _records(traces / "rank-0.jsonl")
    notes = [r["message"] for r in recs if r["kind"] == "note"]
    assert len([n for n in notes if "cannot observe kv_cache_manager.add_dummy_requests" in n]) == 1
    frames = [r for r in recs if r["kind"] == "frame"]
    assert [(f["iter"], f["postpadded"], f["scheduled"], "alloc_ok" in f) for f in frames] == [
        (0, False, 0, False), (1, False, 1, False), (2, False, 0, False)]


def test_a_post_pad_that_calls_the_pad_step_is_recorded_once(tmp_path, monkeypatch):
    """Some shapes implement the post-pad by calling ``_pad_attention_dp_dummy_request`` again
    (tests/trtllm/fixtures/py_executor_newest.py): the inner call must not start a new frame."""
    mod = _load_standin()

    def postpad(self, scheduled_batch):
        if scheduled_batch.batch_size == 0 and self.active_requests:
            n = len(self.active_requests)
            self._pad_attention_dp_dummy_request()   # the stand-in pads only an idle rank
            if len(self.active_requests) == n:       # force one dummy for the test
                d = self.kv_cache_manager.add_dummy_requests(request_ids=[0], is_gen=True)[0]
                d.is_attention_dp_dummy = True
                self.active_requests.append(d)
                scheduled_batch.generation_requests.append(d)

    def iteration(self, overlap):
        self._fetch_new_requests()
        self._pad_attention_dp_dummy_request()
        batch, _, _ = self._schedule()
        self._pad_empty_attention_dp_batch(batch)
        self._can_queue(batch)
        self.active_requests = [r for r in self.active_requests if not r.is_attention_dp_dummy]
        self.iter_counter += 1

    monkeypatch.setattr(mod.PyExecutor, capture.POSTPAD_METHOD, postpad, raising=False)
    monkeypatch.setattr(mod.PyExecutor, "_iteration", iteration)
    saved = dict(capture._config)
    capture.configure(str(tmp_path / "t"))
    capture._config["executors"] = 0
    bootstrap.patch_class(mod.PyExecutor)
    try:
        ex = _one_rank(mod, {"tp_size": 1, "iterations": 2, "arrivals": {"0": {"0": [[4, 14]]}}})
        ex.event_loop()
        writer.flush_all()
    finally:
        bootstrap.unpatch_class(mod.PyExecutor)
        capture._config.clear()
        capture._config.update(saved)
    recs = _records(tmp_path / "t" / "rank-0.jsonl")
    assert not [r for r in recs if r["kind"] == "note" and "twice" in r["message"]]
    frames = [r for r in recs if r["kind"] == "frame"]
    assert [(f["iter"], f["requests"], f["padded"], f["postpadded"], f["scheduled"])
            for f in frames] == [(0, [_r(4, 14)], False, True, 1), (1, [_r(4, 14)], False, True, 1)]
