"""The native single-pass scanner (``forensics.readers.native_scan``) against the reference path.

Every table of a parse with the scanner must equal, row for row and value for value, the same
parse with the reference (Arrow/RE2) path alone: on the shared samples, on generated logs of
every variant (the simulator and the benchmark's generator), on the fuzz corpus, and on
iteration lines mutated the ways that could fool a byte scanner (digits, spacing, prefixes,
truncation, huge integers, unicode). Also: the scanner really takes the common lines (else the
comparisons prove nothing), numba missing falls back to the reference path, and a small input
never imports numba.
"""
from __future__ import annotations

import importlib.util
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics.readers import json_scan, native_scan
from forensics.readers.compiled import builder, cache_dirs, loader
from forensics.readers.compiled.library import object_key
from forensics.readers.executor_log import parse_executor_log
from forensics.simulate import simulate

from . import fuzz_lines
from .test_line_accounting import SHARED

REPO = Path(__file__).resolve().parents[2]
TABLES = ("iterations", "events", "unparsed", "traceback_frames")

pytestmark = pytest.mark.skipif(native_scan.kernel() is None, reason="numba not importable")


def _parse(path: Path, native: bool, **kw) -> dict[str, pa.Table]:
    out: dict[str, list[pa.Table]] = {t: [] for t in TABLES}
    for batch in parse_executor_log(path, path.name, native=native, **kw):
        for t in TABLES:
            out[t].append(getattr(batch, t))
    return {t: pa.concat_tables(v) for t, v in out.items()}


def assert_same(path: Path, **kw) -> dict[str, pa.Table]:
    """Both paths give equal tables; returns the native one."""
    ref, new = _parse(path, False, **kw), _parse(path, True, **kw)
    for t in TABLES:
        if ref[t].equals(new[t]):
            continue
        a, b = ref[t].to_pylist(), new[t].to_pylist()
        assert len(a) == len(b), f"{path}: {t}: {len(a)} reference rows, {len(b)} native"
        for i, (x, y) in enumerate(zip(a, b)):
            diff = {c: (x[c], y[c]) for c in x if x[c] != y[c]}
            assert not diff, f"{path}: {t} row {i}: (reference, native) {diff}"
        assert ref[t].schema == new[t].schema, t
    return new


def _fast_lines(path: Path) -> int:
    """Lines the scanner takes when it reads the whole file as one block."""
    return len(native_scan.scan_block(path.read_bytes()).fast_line)


def _simulated(tmp: Path, variant: str, scenario: str = "nvbug-6438685") -> Path:
    out = tmp / f"sim-{scenario}-{variant}"
    simulate(scenario, out_dir=out, iters=60, log_format=variant)   # in process: no interpreter start
    return out / "executor.log"


def _scan_kernel():
    """The log scanner's kernel module compiled by numba, with numba's cache where the loader
    keeps it: a load after the first compile on this machine, in this process and in the
    processes the tests start (test_numba_internals does the same)."""
    cache_dirs.set_numba_cache()
    from forensics.readers.compiled import scan_kernel

    return scan_kernel


def _bench_module():
    spec = importlib.util.spec_from_file_location("log_generators",
                                                  REPO / "benchmarks" / "log_generators.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("variant", ["V1", "V2", "V3", "V4", "V5"])
def test_simulated_logs_of_every_variant(tmp_path, variant):
    for scenario in ("nvbug-6438685", "surplus-17278"):
        log = _simulated(tmp_path, variant, scenario)
        new = assert_same(log, block_bytes=1 << 14)
        n = new["iterations"].num_rows
        assert n > 100 and _fast_lines(log) == n   # every iteration line read natively


@pytest.mark.parametrize("variant", ["V1", "V2", "V3", "V4", "V5"])
def test_benchmark_generator_of_every_variant(tmp_path, variant):
    log = tmp_path / f"bench-{variant}.log"
    _bench_module().generate_bench(log, 1, variant)
    new = assert_same(log, block_bytes=1 << 16)
    assert new["events"].num_rows > 10 and new["traceback_frames"].num_rows == 1
    assert _fast_lines(log) == new["iterations"].num_rows


def test_shared_samples():
    real = SHARED / "samples" / "real-logs"
    if not real.is_dir():
        pytest.skip("../shared/samples absent")
    for p in sorted(real.iterdir()):
        if p.is_file():
            assert_same(p)
            assert_same(p, block_bytes=997)


@settings(suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1), block=st.sampled_from([61, 997, 1 << 20]),
       real=st.booleans())
def test_fuzz_corpus(seed, block, real):
    rng = random.Random(seed)
    samples = fuzz_lines.sample_lines(SHARED) if real else ()
    data = fuzz_lines.fuzz_log(rng, samples, n_lines=rng.randrange(1, 60))
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "fuzz.log"
        path.write_bytes(data)
        assert_same(path, block_bytes=block, max_line_bytes=4096)


# ----------------------------------------------------------------- mutated iteration lines

_GOOD = [
    ("[11/30/2026-12:00:01] [TRT-LLM] [RANK 3] [I] iter = 12, global_rank = 3, rank = 3, "
    "num_scheduled_requests = 2, kv_cache_util = 0.125, currank_total_requests = 4/32, "
    "host_step_time = 11.553961ms, prev_device_step_time = N/A, timestamp = 2026-11-30 12:00:01, "
    "states = {'num_ctx_requests': 1, 'num_ctx_tokens': 512, 'num_generation_tokens': 3}"),
    ("[02/29/2024-23:59:59] [TRT-LLM] [RANK 0] [W] iter = 1, global_rank = 0, rank = 0, "
    "currank_total_requests = 0/0, elapsed_time = 0.011553960931275007s, "
    "timestamp = 2024-02-29 23:59:59, num_scheduled_requests: 0, "
    "states = {'num_ctx_requests': 0, 'num_ctx_tokens': 0, 'num_generation_tokens': 0}"),
    ("[07/09/2026-16:18:39] [TRT-LLM] [RANK 7] [E] iter = 999999999999999999, global_rank = 7, "
    "rank = 7, num_scheduled_requests = 0, adp_dummy_ctx_tokens = 0, adp_dummy_gen_tokens = 1, "
    "kv_cache_util = N/A, currank_total_requests = 0/0, host_step_time = 5ms, "
    "prev_device_step_time = 0.000001ms, timestamp = 2026-07-09 16:18:39, "
    "states = {'num_ctx_requests': 0, 'num_ctx_tokens': 0, 'num_generation_tokens': 0}"),
]
_PIECES = ["0", "9", "00", "-", "+", ".", "..", "e5", "E-3", " ", "  ", ",", ", ", " = ", ": ",
           "=", ":", "'", "{", "}", "}}", "[", "]", "ms", "s", "N/A", "n/a", "nan", "inf",
           "2147483647", "2147483648", "99999999999", "9" * 18, "9" * 19, "9" * 40,
           "0.1234567890123456789", "13", "32", "60", "24", "00/00", "\u00e9", "\u2028",
           "\ufeff", "\t", "[RANK 1] ", "[I] ", "[TRT-LLM] ", "iter = 5, ", "states = {",
           "rank = 1, ", "global_rank = 2, ", "foo = 1, ", "'num_ctx_tokens': 3, "]


def _mutate(line: str, rng: random.Random) -> str:
    how = rng.randrange(6)
    at = rng.randrange(len(line) + 1)
    digits = [i for i, c in enumerate(line) if c.isdigit()]
    if how == 0 and digits:                       # a digit replaced
        i = rng.choice(digits)
        return line[:i] + rng.choice(_PIECES) + line[i + 1:]
    if how == 1:                                  # something inserted
        return line[:at] + rng.choice(_PIECES) + line[at:]
    if how == 2:                                  # a character deleted
        return line[:at] + line[at + 1:]
    if how == 3:                                  # truncated
        return line[:at]
    if how == 4:                                  # a wrapper or a doubled prefix
        return rng.choice(["0: ", "> ", " ", "node07: ", "[11/30/2026-12:00:01] [TRT-LLM] ",
                           "[RANK 2] ", "\t2025-12-04 22:23:18.869\t"]) + line
    parts = line.split(", ")                     # a field repeated, dropped or moved
    i, j = rng.randrange(len(parts)), rng.randrange(len(parts))
    if rng.random() < 0.4:
        parts.insert(j, parts[i])
    elif rng.random() < 0.5:
        del parts[i]
    else:
        parts[i], parts[j] = parts[j], parts[i]
    return ", ".join(parts)


@settings(suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 40), block=st.sampled_from([256, 1 << 20]))
def test_mutated_iteration_lines(seed, n, block):
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        line = rng.choice(_GOOD)
        for _ in range(rng.choice([0, 1, 1, 2, 3])):
            line = _mutate(line, rng)
        lines.append(line)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "mutated.log"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        assert_same(path, block_bytes=block)


def test_good_lines_are_all_fast(tmp_path):
    path = tmp_path / "good.log"
    path.write_text("\n".join(_GOOD) + "\n")
    assert _fast_lines(path) == 3
    rows = assert_same(path)["iterations"].to_pylist()
    assert [r["format"] for r in rows] == ["V4", "V2", "V5"]
    assert rows[1]["elapsed_time_s"] == 0.011553960931275007
    assert rows[2]["iter"] == 999999999999999999 and rows[2]["kv_cache_util"] is None
    assert str(rows[1]["log_time"]) == "2024-02-29 23:59:59"


@pytest.mark.parametrize("odd, scanned", [
    (b"[W] caf\xc3\xa9 \xe2\x80\xa8 done", True),         # UTF-8 outside fast lines: scanned
    (b"[W] bad \xff\xfe byte", False),                    # invalid UTF-8: reference path
    (b"[W] line with \r inside", False),                   # \r: reference path
    (b"\0\0\0[W] after a NUL run", False),                   # NUL: reference path
])
def test_odd_bytes_between_fast_lines(tmp_path, odd, scanned):
    """The scan itself notices odd bytes in the lines it does not take (no pre-pass)."""
    good = [g.encode() for g in _GOOD]
    path = tmp_path / "odd.log"
    path.write_bytes(b"\n".join(good + [odd] + good) + b"\n")
    scan = native_scan.scan_block(path.read_bytes())
    assert (scan is not None) == scanned
    if scanned:
        assert list(scan.fast_line) == [0, 1, 2, 4, 5, 6]
    assert assert_same(path)["iterations"].num_rows == 6
    assert assert_same(path, block_bytes=997)["iterations"].num_rows == 6


# ----------------------------------------------------------------- switching paths

def _native_rows_in_subprocess(log: Path, check: str, **env: str) -> list[str]:
    """Iteration rows of a native-path parse of ``log`` in a fresh process where numba cannot
    be imported (``check`` runs first), and whether the scanner reported an error."""
    code = ("import sys; sys.modules['numba'] = None\n"
            "from forensics.readers import native_scan\n"
            "from forensics.readers.compiled import loader\n"
            "from forensics.readers.executor_log import parse_executor_log\n"
            f"{check}\n"
            "n = sum(b.iterations.num_rows for b in parse_executor_log(sys.argv[1], 'x', "
            "native=True))\n"
            "k = native_scan.kernel()\n"
            "print(n, bool(k and k['failed']()))\n")
    out = subprocess.run([sys.executable, "-c", code, str(log)], capture_output=True, text=True,
                         check=False, env=dict(os.environ, PYTHONPATH=str(REPO), **env))
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_without_numba_the_reference_path_reads(tmp_path):
    log = tmp_path / "bench.log"
    _bench_module().generate_bench(log, 1, "V4")
    rows = _native_rows_in_subprocess(
        log, "sys.modules['llvmlite'] = None\n"
        "assert native_scan.kernel() is None and not native_scan.enabled(1 << 40)",
        FORENSICS_INGEST_PATH="native")
    assert rows == [str(assert_same(log)["iterations"].num_rows), "False"]


def test_saved_object_runs_without_numba(tmp_path):
    """The object file saved from numba's functions, loaded by llvmlite alone in a process
    where numba cannot be imported, reads the same rows as the reference path."""
    import llvmlite.binding as llvm

    scan_kernel = _scan_kernel()
    objects, meta = builder._objects(scan_kernel.ENTRY_POINTS)
    assert builder._save(tmp_path / "cache" / f"scan-{object_key(llvm)}", objects, meta)
    log = tmp_path / "bench.log"
    _bench_module().generate_bench(log, 1, "V3")
    rows = _native_rows_in_subprocess(
        log, "assert native_scan.kernel() is not None and loader._engines",
        NUMBA_CACHE_DIR=str(tmp_path / "cache"), FORENSICS_CACHE_DIR=str(tmp_path / "user"))
    assert rows == [str(assert_same(log)["iterations"].num_rows), "False"]
    assert _fast_lines(log) > 1000


def test_damaged_object_file_is_not_loaded(tmp_path):
    """A damaged saved object (LLVM would crash on it) is refused by its digest; numba's
    functions read the block instead, with the same rows."""
    import llvmlite.binding as llvm

    scan_kernel = _scan_kernel()
    objects, meta = builder._objects(scan_kernel.ENTRY_POINTS)
    stem = tmp_path / f"scan-{object_key(llvm)}"
    assert builder._save(stem, objects, meta)
    assert loader._load(llvm, stem) is not None
    obj = stem.parent / (stem.name + ".scan.o")
    obj.write_bytes(obj.read_bytes()[:1000])
    assert loader._load(llvm, stem) is None
    log = tmp_path / "bench.log"
    _bench_module().generate_bench(log, 1, "V5")
    code = ("import sys\n"
            "from forensics.readers import native_scan\n"
            "from forensics.readers.compiled import loader\n"
            "from forensics.readers.executor_log import parse_executor_log\n"
            "from forensics.readers.compiled import cache_dirs\n"
            "cache_dirs.searched = lambda: [__import__('pathlib').Path(sys.argv[2])]\n"
            "n = sum(b.iterations.num_rows for b in parse_executor_log(sys.argv[1], 'x', "
            "native=True))\n"
            "print(n, not loader._engines, 'numba' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code, str(log), str(tmp_path)],
                         capture_output=True, text=True, check=False,
                         env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert out.returncode == 0, out.stderr
    # numba's functions ran (no engine), and saved a good object again
    assert out.stdout.split() == [str(assert_same(log)["iterations"].num_rows), "True", "True"]
    assert loader._load(llvm, stem) is not None


def test_small_inputs_never_import_numba(tmp_path):
    log = _simulated(tmp_path, "V4")
    code = ("import sys, forensics\n"
            "forensics.ingest([sys.argv[1]], sys.argv[2], kind='log')\n"
            "print('numba' in sys.modules or 'llvmlite' in sys.modules)\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("FORENSICS_INGEST_PATH", None)
    out = subprocess.run([sys.executable, "-c", code, str(log), str(tmp_path / "ds")],
                         capture_output=True, text=True, env=env, check=True)
    assert out.stdout.split()[-1] == "False"


@pytest.mark.parametrize("module", [native_scan, json_scan], ids=["logs", "json_lines"])
def test_switch_by_size_and_environment(monkeypatch, module):
    """Both compiled paths: by input size (each its own threshold), or forced either way by
    FORENSICS_INGEST_PATH (native_scan.chosen). By size, only once the kernels are ready
    (here: loaded or compiled by kernel(); see test_cold_cache_builds_in_the_background)."""
    monkeypatch.delenv(native_scan.PATH_ENV, raising=False)
    assert module.kernel() is not None
    assert not module.enabled(module.MIN_BYTES - 1)
    assert module.enabled(module.MIN_BYTES)
    monkeypatch.setenv(native_scan.PATH_ENV, "reference")
    assert not module.enabled(1 << 40)
    monkeypatch.setenv(native_scan.PATH_ENV, "native")
    assert module.enabled(1)


def test_format_of_a_line_does_not_depend_on_its_block(tmp_path):
    """A line whose ``num_scheduled_requests = `` value does not parse is V1, alone or next to a
    V4 line in one block (the reference path once called it V4 when the block had another line
    with the field; found by test_mutated_iteration_lines)."""
    cut = ("[07/09/2026-16:18:39] [TRT-LLM] [RANK 7] [E] iter = 5, global_rank = 7, rank = 7, "
           "num_scheduled_requests = 0,")
    v2 = ("[02/29/2024-23:59:59] [TRT-LLM] [RANK 0] [W] iter = 1, global_rank = 0, rank = 0, "
          "num_scheduled_requests: 0")
    for lines in ([cut], [v2, cut], [cut, v2], [_GOOD[0], cut]):
        path = tmp_path / "cut.log"
        path.write_text("\n".join(lines) + "\n")
        (row,) = [r for r in assert_same(path)["iterations"].to_pylist() if r["iter"] == 5]
        assert row["format"] == "V1" and row["num_scheduled_requests"] is None
        assert dict(row["extra"]) == {"num_scheduled_requests": "0,"}


def test_more_lines_than_the_last_blocks_density_predicts(tmp_path, monkeypatch):
    """scan_block sizes its outputs by the last block's lines per byte; a block of far shorter
    lines overflows them and is counted and scanned again: same tables as the reference path,
    and the counted scan's lines equal a direct count."""
    log = tmp_path / "mixed.log"
    _bench_module().generate_bench(log, 1, "V4")
    text = log.read_bytes()
    short = b"".join(b"x%d\n" % i for i in range(20000))   # 3-6 byte lines
    log.write_bytes(text + short + text[:200000] + b"\n" * 5000 + text[:100000])
    monkeypatch.setattr(native_scan, "_lines_per_byte", 0.0)
    new = assert_same(log, block_bytes=1 << 16)
    assert new["unparsed"].num_rows >= 20000
    calls = []
    real = native_scan._scan
    monkeypatch.setattr(native_scan, "_scan", lambda *a: calls.append(a[-1]) or real(*a))
    monkeypatch.setattr(native_scan, "_lines_per_byte", 1 / 250)
    scan = native_scan.scan_block(short)
    assert scan is not None and scan.n == 20000
    assert len(calls) == 2 and calls[1] == 20001   # overflowed, then counted
    assert native_scan._lines_per_byte == 20000 / len(short)


def test_other_lines_of_consecutive_blocks_are_read_in_one_call(tmp_path, monkeypatch):
    """The reference path's per-line work on the lines the scanner left is done once for up to
    ``GROUP_BLOCKS`` consecutive scanned blocks: fewer calls than such blocks, and the same
    tables as one call per block and as the reference path (iteration lines the scanner does
    not take, events and tracebacks running across blocks, a long line between groups)."""
    from forensics.readers import analysed_block, executor_log

    log = tmp_path / "groups.log"
    _bench_module().generate_bench(log, 1, "V4")
    text = log.read_bytes().splitlines(keepends=True)
    odd = [b"[11/30/2026-12:00:01] [TRT-LLM] [RANK 3] [I] iter = 987654, global_rank = 3, "
           b"rank = 3, host_step_time = 1.5e3ms\n",     # exponent: the reference path's
           b"Traceback (most recent call last):\n", b'  File "x.py", line 3, in f\n',
           b"RuntimeError: boom\n"]
    lines = []
    for i, line in enumerate(text):
        lines.append(line)
        if i % 50 == 0:
            lines.extend(odd)
        if i == len(text) // 2:
            lines.append(b"y" * 5000 + b"\n")     # a long line (max_line_bytes below)
    log.write_bytes(b"".join(lines))
    kw = dict(block_bytes=1 << 15, max_line_bytes=4096)
    grouped = assert_same(log, **kw)
    calls: list[int] = []
    real = analysed_block.features
    monkeypatch.setattr(analysed_block, "features",
                        lambda lines, *a: calls.append(len(lines)) or real(lines, *a))
    assert _parse(log, True, **kw)["iterations"].equals(grouped["iterations"])
    n_grouped = len(calls)
    calls.clear()
    monkeypatch.setattr(executor_log, "GROUP_BLOCKS", 1)
    single = _parse(log, True, **kw)
    n_single = len(calls)   # one call per scanned block with lines left
    assert n_single > 20 and n_single / 3 <= n_grouped < n_single / 2, (n_single, n_grouped)
    for t in TABLES:
        assert single[t].equals(grouped[t]), t
    assert grouped["iterations"].filter(pa.compute.equal(
        grouped["iterations"].column("iter"), 987654)).num_rows == len(range(0, len(text), 50))
    assert grouped["events"].filter(pa.compute.equal(
        grouped["events"].column("kind"), "long_line")).num_rows == 1


# ----------------------------------------------------------------- the varied generator, prefixes

def test_varied_generator(tmp_path):
    """The benchmark's varied log (fields in any order, colons, C++ and Python warnings,
    tracebacks, C++ backtraces): the same tables both ways, whatever the block, and every
    iteration line read by the scanner."""
    log = tmp_path / "varied.log"
    _bench_module().generate_varied(log, 1)
    for block in (1 << 14, 1 << 20):
        new = assert_same(log, block_bytes=block)
    kinds = set(new["events"].column("kind").to_pylist())
    assert {"cpp_log", "log", "traceback", "cpp_backtrace", "event_loop_error"} <= kinds
    assert new["traceback_frames"].num_rows > 50 and new["unparsed"].num_rows > 10
    assert _fast_lines(log) == new["iterations"].num_rows > 1000


def _decimal_texts(rng: random.Random) -> list[str]:
    """Decimals past ``m / 10**k``'s exact range: ``repr`` of random floats (17 digits), random
    mantissas of 16-18 digits with 0-27 decimals, ties between two doubles (2**53 + 1 and
    halves of such), and the bounds (18 digits, 27 and 28 decimals, zeros)."""
    out = [repr(rng.uniform(5, 450)) for _ in range(300)]
    for _ in range(300):
        m = str(rng.randint(10 ** 15, 10 ** 18 - 1))
        k = rng.randint(0, min(27, len(m) - 1))
        out.append(m[:len(m) - k] + ("." + m[len(m) - k:] if k else ""))
    out += ["9007199254740993", "9007199254740995", "4503599627370496.5", "4503599627370497.5",
            "2251799813685248.25", "999999999999999999", "1000000000000000000",
            "0.000000000000000000000000001", "0.0000000000000000000000000001",
            "0.123456789012345678", "12345678901234567.8", "0.00000000000000000000000000",
            "000000000000000012.5", "9223372036854775807.5"]
    return out


def test_decimals_past_the_exact_quotient(tmp_path):
    """A decimal of up to 18 digits is read by the scanner itself, as the nearest double
    (ties to even): the same value as the reference path's cast of its text."""
    texts = _decimal_texts(random.Random(7))
    lines = [f"[11/30/2026-12:00:01] [TRT-LLM] [RANK 0] [I] iter = {i}, global_rank = 0, "
             f"rank = 0, currank_total_requests = 1/2, host_step_time = {t}ms, "
             f"prev_device_step_time = {t}ms, timestamp = 2026-11-30 12:00:01, "
             f"states = {{'num_ctx_requests': 0, 'num_ctx_tokens': 0, "
             f"'num_generation_tokens': 0}}" for i, t in enumerate(texts)]
    path = tmp_path / "decimals.log"
    path.write_text("\n".join(lines) + "\n")
    rows = assert_same(path)["iterations"].to_pylist()
    assert [r["host_step_time_ms"] for r in rows] == [float(t) for t in texts]
    scan = native_scan.scan_block(path.read_bytes())
    assert len(scan.fast_line) == len(texts)
    digits = [len(t.replace(".", "")) for t in texts]
    # Arrow reads the text of the longer ones only (more than 18 digits, or 28 decimals)
    longer = [d > 18 or len(t.partition(".")[2]) > 27 for t, d in zip(texts, digits)]
    need = scan.need(native_scan.LOOKUP.flt_row[native_scan.NAMES.index("host_step_time")])
    assert need.tolist() == longer
    assert sum(longer) == 7   # of the bounds: 19, 20 or 28 digits (leading zeros count)


_SHAPES = [   # (line, shape, body offset, rank, severity) as the scan reads them
    ("[11/30/2026-12:00:01] [TRT-LLM] [RANK 3] [W] hi", "COMMON", 45, 3, "W"),
    ("[11/30/2026-12:00:01] [TRT-LLM] [RANK 12] [E] ", "COMMON", 46, 12, "E"),
    ("[11/30/2026-12:00:01] [TRT-LLM] [RANK 3] [W] [_torch][RANK 3] x", "OTHER", 0, 0, None),
    ("[11/30/2026-12:00:01] [TRT-LLM] [W] no rank", "OTHER", 0, 0, None),
    ("[TensorRT-LLM][WARNING] [kv cache manager] x", "CPP", 24, 0, "W"),
    ("[TensorRT-LLM][INTERNAL_ERROR]boom", "CPP", 30, 0, "F"),
    ("[TensorRT-LLM][TRACE]", "CPP", 21, 0, "V"),
    ("[TensorRT-LLM][RANK 0][INFO] x", "OTHER", 0, 0, None),
    ("[TensorRT-LLM] TensorRT-LLM version: 1.2", "OTHER", 0, 0, None),
    ('  File "a.py", line 3, in f', "BARE", 0, 0, None),
    ("Traceback (most recent call last):", "BARE", 0, 0, None),
    ("KeyError: None", "BARE", 0, 0, None),
    ("    ^^^^", "BARE", 0, 0, None),
    ("1       0x7f492ab87384 tensorrt_llm::common::throwRuntimeError", "BARE", 0, 0, None),
    ("<frozen importlib._bootstrap_external>:1184: FutureWarning: x", "BARE", 0, 0, None),
    ("", "BARE", 0, 0, None),
    ("node07: x", "OTHER", 0, 0, None),          # pdsh host
    ("12: x", "OTHER", 0, 0, None),              # srun
    ("2025-06-28 17:32:17,461 - INFO - a: b", "OTHER", 0, 0, None),
    ("ERROR:    Exception in ASGI application", "OTHER", 0, 0, None),   # uvicorn
    ("I1130 12:00:00.123456 1234 file.cc:12] x", "OTHER", 0, 0, None),  # glog
    ("> quoted", "OTHER", 0, 0, None),
]


def test_prefix_shapes_of_other_lines(tmp_path):
    """What the scan reads of the prefix of a line it does not take (hand-worked), and the
    same tables as the reference path with those lines between iteration lines."""
    path = tmp_path / "shapes.log"
    path.write_text("\n".join([_GOOD[0]] + [s[0] for s in _SHAPES] + [_GOOD[1]]) + "\n")
    scan = native_scan.scan_block(path.read_bytes())
    known = native_scan.known_prefixes(scan)
    names = ["OTHER", "COMMON", "CPP", "BARE"]
    for i, (line, shape, offset, rank, sev) in enumerate(_SHAPES, 1):
        got = names[known.shape[i]]
        assert got == shape, (line, got)
        if shape != "OTHER":
            assert known.body_offset[i] == offset, line
        if shape == "COMMON":
            assert known.rank[i] == rank, line
        if sev is not None:
            assert native_scan.SEVERITIES[known.severity[i]] == sev, line
    assert_same(path)
    assert_same(path, block_bytes=97)


_OTHER_PIECES = ["[TensorRT-LLM]", "[WARNING]", "[INFO] ", "[RANK 1]", "[11/30/2026-12:00:01] ",
                 "[TRT-LLM] ", "[RANK 3] ", "[W] ", "[E]", "  ", "\t", "0: ", "12", ":", "-",
                 "node07: ", "ERROR:", "I1130 ", "> ", "File ", '"x.py", ', "line 3", "0x7f ",
                 "Traceback (most recent call last):", "KeyError: None", "^^^", "[", "]", " ",
                 "2025-06-28 17:32:17,461 - INFO - ", "\u00e9", "iter = 5, "]


@settings(suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 40), block=st.sampled_from([97, 1 << 20]))
def test_mutated_other_lines(seed, n, block):
    """Lines near the prefix shapes the scan reads (pieces of prefixes, levels, frames joined
    and mutated) between iteration lines: the same tables as the reference path."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        if rng.random() < 0.3:
            lines.append(rng.choice(_GOOD))
            continue
        line = "".join(rng.choice(_OTHER_PIECES) for _ in range(rng.randrange(1, 5)))
        if rng.random() < 0.5:
            line = _mutate(line + " text", rng) if line else line
        lines.append(line)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "others.log"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        assert_same(path, block_bytes=block)
