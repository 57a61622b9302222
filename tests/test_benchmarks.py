"""Every benchmark script still runs (tiny sizes): benchmarks are not timed tests, but a script
that no longer runs measures nothing. Each is started as a user would, from the repo root."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

CASES = {
    "ingest": ["--size-mb", "2", "--methods", "ours,naive,cat", "--rounds", "1",
               "--generators", "bench"],
    "replay": ["--ranks", "4", "--iters", "300", "--ref-iters", "50"],
    "record": ["--iters", "200", "--rounds", "1"],
    "simulate": ["--iters", "60"],
    "trtllm_hook": ["--ranks", "2", "--iters", "20", "--rounds", "1"],
    "trace_ingest": ["--iters", "20,40", "--ranks", "4", "--rounds", "1",
                     "--methods", "ours,json.loads"],
    "startup": ["--rounds", "1"],
    # the in-memory baseline for the first size only (the second takes the branch that skips it)
    "postmortem": ["--sizes", "4x50,4x100", "--rounds", "1", "--baseline-up-to", "200",
                   "--floor-parts"],
    "explore": ["--policies", "prefix-2026", "--iterations", "1", "--requests", "1",
                "--era", "", "--small-iterations", "2"],
    "explore_eras": ["--eras", "002f3cc", "--iterations", "1"],
}
try:  # the campaign compares serial with a LocalCluster: it needs the [dask] extra
    import distributed  # noqa: F401
    CASES["campaign"] = ["--configs", "1", "--sim-jobs", "1", "--scale", "0.004"]
except ImportError:  # pragma: no cover - without the extra
    pass


@pytest.mark.parametrize("name", sorted(CASES))
def test_benchmark_script_runs(name, tmp_path):
    env = dict(os.environ, TMPDIR=str(tmp_path))
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / f"{name}.py"), *CASES[name]],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    out = proc.stdout
    # Each benchmark prints a comparison against its baseline measured in the same run.
    assert any(ch.isdigit() for ch in out) and ("x" in out or "ratio" in out.lower()), out[-2000:]


def _wholeprocess():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import wholeprocess
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return wholeprocess


def test_host_times_read_busy_and_steal_from_proc_stat():
    """Busy is user + nice + system + irq + softirq (idle, iowait and steal are not), steal the
    eighth field; guest (already inside user) is not added again."""
    wp = _wholeprocess()
    text = ("cpu  1000 50 300 9000 40 5 15 200 77 0\n"
            "cpu0 500 25 150 4500 20 2 7 100 40 0\n"
            "intr 12345\n")
    t = wp.parse_proc_stat(text, 100)
    assert t.busy == (1000 + 50 + 300 + 5 + 15) / 100
    assert t.steal == 2.0
    later = wp.parse_proc_stat(text.replace("cpu  1000", "cpu  1250").replace(" 200 77", " 260 77"), 100)
    assert (later - t).busy == pytest.approx(2.5)
    assert (later - t).steal == pytest.approx(0.6)


def test_host_times_refuses_a_stat_without_a_cpu_line():
    wp = _wholeprocess()
    with pytest.raises(ValueError):
        wp.parse_proc_stat("intr 1\nctxt 2\n", 100)


def test_quiet_ratios_keep_the_rounds_where_neither_process_saw_steal():
    """A round counts as quiet only when both of its processes saw at most the limit of steal;
    the ratio is ours over the floor of the same round."""
    wp = _wholeprocess()
    ours = [(12.0, 0.1), (13.0, 0.9), (11.0, 0.0), (10.0, 0.3)]
    floor = [(3.0, 0.0), (4.0, 0.0), (2.0, 2.5), (4.0, 0.31)]
    assert wp.quiet_ratios(ours, floor, steal_limit=0.3) == [4.0]
    assert wp.quiet_ratios(ours, floor, steal_limit=1.0) == [4.0, 3.25, 2.5]
    assert wp.quiet_ratios([], []) == []
    with pytest.raises(ValueError):
        wp.quiet_ratios(ours, floor[:3])
