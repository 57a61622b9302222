"""The replay library imports nothing from ``forensics`` (issue 12 item 5)."""
from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPLAY = Path(__file__).resolve().parents[2] / "replay"

# A meta-path finder that refuses every ``forensics`` module, as on a machine without it.
_BLOCKER = textwrap.dedent("""
    import sys
    class _Block:
        def find_spec(self, name, path=None, target=None):
            if name == "forensics" or name.startswith("forensics."):
                raise ImportError(f"blocked: {name}")
            return None
    sys.meta_path.insert(0, _Block())
""")


def _run_blocked(body: str) -> subprocess.CompletedProcess:
    code = _BLOCKER + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPLAY.parent, timeout=120)


def test_no_replay_module_names_forensics_in_an_import():
    offenders = []
    for f in sorted(REPLAY.rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{f.name}:{node.lineno}: {n}" for n in names
                          if n == "forensics" or n.startswith("forensics.")]
    assert offenders == []


def test_replay_imports_and_replays_in_memory_frames_without_forensics():
    # Hand-worked: two ranks, prefix-2026, disaggregated. Rank 0 holds one request awaiting KV
    # (DISAGG_GENERATION_INIT, which the legacy count leaves out), so it is padded; rank 1 holds
    # one GENERATION_TO_COMPLETE request, which the legacy count calls schedulable (no dummy) but
    # the scheduler refuses: batch 0, the fleet skips and rank 0's dummy leaks at iteration 0.
    proc = _run_blocked("""
        import pandas as pd
        import replay
        from replay.errors import NoReaderError
        runs = pd.DataFrame([dict(run="r", source="mem", line=1, tp_size=2, pp_size=1,
                                  max_batch_size=4, max_num_active_requests=4, disaggregated=True,
                                  overlap_scheduler=True, encoder_decoder=False, build="",
                                  record_json="{}")])
        frames = pd.DataFrame([dict(run="r", source="mem", line=2 + r, iter=0, rank=r,
                                    num_requests=1, num_dummies=0, expected=None, padded=None,
                                    scheduled=None, can_queue=None, alloc_ok=None,
                                    postpadded=None) for r in (0, 1)])
        requests = pd.DataFrame([dict(run="r", iter=0, rank=0, pos=0, request_id=1, state=8,
                                      dummy=False),
                                 dict(run="r", iter=0, rank=1, pos=0, request_id=2, state=14,
                                      dummy=False)])
        rf = replay.RunFrames.from_tables(runs, frames, requests)
        res = replay.run(rf, policy="prefix-2026")
        print("LEAKS", [(l.rank, l.iter_created) for l in res.leak_records], "CRASH", res.crash)
        try:
            replay.RunFrames.from_records([{"kind": "run"}])
        except NoReaderError as e:
            print("NOREADER", "pip install adp-forensics" in str(e))
        assert not any(m == "forensics" or m.startswith("forensics.") for m in sys.modules)
    """)
    assert proc.returncode == 0, proc.stderr
    assert "LEAKS [(0, 0)] CRASH None" in proc.stdout
    assert "NOREADER True" in proc.stdout


def test_forensics_errors_catch_the_replay_errors():
    from forensics.errors import ConfigError, ForensicsError, PolicyError
    from replay.catalogue import get_policy
    import replay.errors
    assert PolicyError is replay.errors.PolicyError and ConfigError is replay.errors.ConfigError
    with pytest.raises(ForensicsError, match="unknown policy"):
        get_policy("no-such-policy")


def test_replay_input_reads_a_path_through_the_pipeline_reader(tmp_path):
    # With forensics importable, replay finds its reader by name (nothing installed first).
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import json, replay
        p = {str(tmp_path / "t.jsonl")!r}
        recs = [dict(kind="run", format="adp-trace", version=1, tp_size=1, pp_size=1,
                     max_batch_size=4, max_num_active_requests=4, disaggregated=False,
                     overlap_scheduler=True, build="x"),
                dict(kind="frame", iter=0, rank=0, requests=[dict(id=1, state="GENERATION_IN_PROGRESS")])]
        open(p, "w").write("\\n".join(json.dumps(r) for r in recs) + "\\n")
        res = replay.replay_input(p, ["prefix-2026"])
        print("OK", res["prefix-2026"].crash, len(res["prefix-2026"].leaks))
    """)], capture_output=True, text=True, cwd=REPLAY.parent, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "OK None 0" in proc.stdout
