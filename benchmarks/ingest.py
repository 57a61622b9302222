"""Executor-log ingest as a user runs it, against the baselines a user would write, same run.

Every method is a whole process (interpreter start-up, imports and output included), timed in
paired, interleaved rounds by ``wholeprocess`` (wall, CPU of the child and its threads, peak
RSS; medians). The log comes from one of three generators; the first two write the simulator's
line layout of one iteration-line variant (``--variant``, default V4), the third is built to
differ from it:

- ``bench``: iteration lines of 8 ranks with random values, plus warnings, C++ lines, an ADP
  error now and then and a closing traceback (a 16 MB chunk repeated, iteration numbers go on);
- ``simulate``: ``forensics simulate --scenario fleet-1h`` (32 ranks), the product's simulator;
- ``varied``: a writer of its own here, not the simulator (shapes from the public excerpts in
  ``../shared/samples/real-logs`` and docs/adp-executor.md section 8): 8 ranks' iteration lines
  whose fields come in a new random order on every line (``iter`` first, ``states`` last, as
  upstream prints them), ``num_scheduled_requests: N`` with a colon, ``kv_cache_util`` on half
  the lines, 17-digit ``repr`` decimals; and ~10 % other lines: bursts of C++
  ``[TensorRT-LLM][WARNING]``/``[INFO]`` lines, the Python logger's warnings and notes, Python
  ``warnings`` (file:line: Category: text, then the indented source line), multi-line Python
  tracebacks (often after an ``Error in event loop`` line) and numbered C++ backtraces (a
  32 MB chunk repeated).

Methods (the baselines are scripts this benchmark writes into its work directory; read them
there, ``--workdir`` keeps them):

- ``ours``: ``python -m forensics ingest LOG -o DS -q`` (the console script minus any launcher
  shim of the environment): every table (iterations, events, unparsed), sha256, summary;
- ``naive``: the loop a user would write: ONE compiled regex capturing every field of the
  variant's iteration line (prefix included), ``match`` per line, ``groupdict`` rows, one pandas
  DataFrame, numbers typed with ``to_numeric``, ``to_parquet`` (iterations only);
- ``polars``: lazy ``scan_csv`` of whole lines, ``filter``, one ``str.extract_groups`` with the
  same regex, casts, ``sink_parquet`` (``POLARS_MAX_THREADS=2``);
- ``duckdb``: ``read_csv`` of one VARCHAR column, ``regexp_extract`` with the same regex into
  named groups, ``TRY_CAST``, ``COPY ... TO parquet`` (2 threads);

  on the ``varied`` log no single regex of the whole line can read fields in any order, so the
  same three are written as a user would for it: ``naive`` matches a head regex (prefix and
  ``iter``) and ``findall`` one regex of the ``name = value`` / ``name: value`` pairs into the
  row's dict, splits ``a/b``, strips ``ms``, then pandas as above; ``polars`` and ``duckdb``
  take the head's groups and one regex extract per field (``\\bname'?(?: =|:) (value)``),
  then the same casts and Parquet;
- floors: ``cat LOG > /dev/null`` and ``grep -c 'iter = ' LOG``.

Every process runs with its bytecode cached (``wholeprocess.warm_bytecode``: the warm-up run of
ours fills it), as an installed package's second run has it.

The baselines build the iterations table only; ours builds every table, so any ratio is, if
anything, unfair to ours. The figures to quote are CPU-time ratios from one run (on a shared
machine wall time also measures the neighbours); the last lines print ours' CPU ratio to the
loop and to polars per generator against the goals (>= 8x and >= 3x).

Logs are generated once per work directory and size (``{generator}-{variant}-{size}MB.log``)
and reused by later runs with the same ``--workdir``. ``ours`` runs once untimed first (its
first run on a fresh install compiles the numba scanner into numba's cache).

Usage:
    python benchmarks/ingest.py                        # 64 MB, three generators, 3 rounds
    python benchmarks/ingest.py --size-mb 512 --rounds 3 --generators bench,varied
    python benchmarks/ingest.py --methods ours,naive --size-mb 2 --rounds 1   # smoke test
    python benchmarks/ingest.py --before ../main --generators bench,varied   # a change's effect
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
import wholeprocess as wp  # noqa: E402  (the helper beside this script)

# benchmarks/replay.py would shadow the replay package for anything imported from here on.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

REPO = _HERE.parent

# --------------------------------------------------------------------------- the variants

_HEAD = [("iter", r"\d+"), ("global_rank", r"\d+"), ("rank", r"\d+")]
_CUR = [("currank_total_requests", r"(?P<currank_requests>\d+)/(?P<total_requests>\d+)")]
_TIMES = [("host_step_time", r"(?P<host_step_time>[0-9.]+)ms"),
          ("prev_device_step_time", r"(?:(?P<prev_device_step_time>[0-9.]+)ms|N/A)")]
_TS = [("timestamp", r"[^,]+")]
_STATES = ("states = \\{'num_ctx_requests': (?P<num_ctx_requests>\\d+), 'num_ctx_tokens': "
           "(?P<num_ctx_tokens>\\d+), 'num_generation_tokens': (?P<num_generation_tokens>\\d+)\\}")
#: Per variant, the fields in the simulator's order (``forensics/simulate/log_writer.py``):
#: (name, value pattern); a pattern with its own groups names them itself; ``name:`` is the
#: colon form (``num_scheduled_requests: 3`` in V2/V3).
VARIANTS = {
    "V1": _HEAD + _CUR + [("elapsed_time", r"(?P<elapsed_time>[0-9.e-]+)s")] + _TS,
    "V2": _HEAD + _CUR + [("elapsed_time", r"(?P<elapsed_time>[0-9.e-]+)s")] + _TS
    + [("num_scheduled_requests:", r"\d+")],
    "V3": _HEAD + _CUR + _TIMES + _TS + [("num_scheduled_requests:", r"\d+")],
    "V4": _HEAD + [("num_scheduled_requests", r"\d+"), ("kv_cache_util", r"(?:(?P<kv_cache_util>"
                   r"[0-9.]+)|N/A)")] + _CUR + _TIMES + _TS,
    "V5": _HEAD + [("num_scheduled_requests", r"\d+"), ("adp_dummy_ctx_tokens", r"\d+"),
                   ("adp_dummy_gen_tokens", r"\d+"),
                   ("kv_cache_util", r"(?:(?P<kv_cache_util>[0-9.]+)|N/A)")] + _CUR + _TIMES + _TS,
}
_PREFIX = (r"^\[(?P<log_time>[^\]]+)\] \[TRT-LLM\] \[RANK (?P<prefix_rank>\d+)\] "
           r"\[(?P<severity>[A-Z])\] ")
FLOATS = ("elapsed_time", "host_step_time", "prev_device_step_time", "kv_cache_util")
STRINGS = ("log_time", "severity", "timestamp")


def iteration_regex(variant: str) -> str:
    """The one regex for a whole iteration line of ``variant``, every field a named group."""
    parts = []
    for name, pat in VARIANTS[variant]:
        if name.endswith(":"):
            parts.append(f"{name} (?P<{name[:-1]}>{pat})")
        elif "(?P<" in pat:
            parts.append(f"{name} = {pat}")
        else:
            parts.append(f"{name} = (?P<{name}>{pat})")
    return _PREFIX + ", ".join(parts) + ", " + _STATES + "$"


def group_names(variant: str) -> list[str]:
    import re
    return list(re.compile(iteration_regex(variant)).groupindex)


# --------------------------------------------------------------------------- generators

def _bench_line(rng: random.Random, it: int, rank: int, variant: str) -> str:
    pre = f"[11/30/2026-12:{(it // 60) % 60:02d}:{it % 60:02d}] [TRT-LLM] [RANK {rank}] [I] "
    vals = {
        "iter": str(it), "global_rank": str(rank), "rank": str(rank),
        "currank_total_requests": f"{it * 3 + rank}/{it * 24}",
        "elapsed_time": f"{rng.uniform(0.005, 0.08)!r}s",
        "host_step_time": f"{round(rng.uniform(5, 80), 6)}ms",
        "prev_device_step_time": "N/A" if rng.random() < 0.05 else f"{round(rng.uniform(5, 80), 6)}ms",
        "timestamp": "2026-11-30 12:00:01",
        "num_scheduled_requests": str(rng.randint(0, 64)),
        "kv_cache_util": f"{rng.random():.3f}",
        "adp_dummy_ctx_tokens": "0", "adp_dummy_gen_tokens": str(rng.randint(0, 1)),
    }
    body = []
    for name, _ in VARIANTS[variant]:
        body.append(f"{name} {vals[name[:-1]]}" if name.endswith(":") else f"{name} = {vals[name]}")
    states = (f"states = {{'num_ctx_requests': {rng.randint(0, 4)}, 'num_ctx_tokens': "
              f"{rng.randint(0, 8192)}, 'num_generation_tokens': {rng.randint(0, 64)}}}")
    return pre + ", ".join(body) + ", " + states


def _repeat_to_size(f, chunk: str, size_mb: int) -> None:
    """Write ``chunk`` to ``f`` until at least ``size_mb`` MiB are written (a generator builds one
    chunk of lines and repeats it: the file is as varied as the chunk)."""
    written = 0
    while written < size_mb << 20:
        f.write(chunk)
        written += len(chunk)


def generate_bench(path: Path, size_mb: int, variant: str, seed: int = 0) -> None:
    """~size_mb of log: a 16 MB unique chunk repeated (iteration numbers continue)."""
    rng = random.Random(seed)
    lines: list[str] = []
    it = 0
    size = 0
    while size < min(16, size_mb) << 20:
        for rank in range(8):
            lines.append(_bench_line(rng, it, rank, variant))
            size += len(lines[-1]) + 1
        if it % 50 == 0:
            lines.append(f"[11/30/2026-12:00:01] [TRT-LLM] [RANK {it % 8}] [W] active_requests (9) "
                         "exceeds expected_num_active_requests (8); tolerating the ADP pad-dummy "
                         "surplus")
            lines.append("[TensorRT-LLM][WARNING] [kv cache manager] storeContextBlocks: "
                         f"Can not find sequence for request {it}")
        if it % 997 == 0:
            lines.append("[11/30/2026-12:00:01] [TRT-LLM] [RANK 3] [E] Error in event loop: x")
        it += 1
    with open(path, "w") as f:
        _repeat_to_size(f, "\n".join(lines) + "\n", size_mb)
        f.write("Traceback (most recent call last):\n"
                '  File "/usr/lib/python3.12/site-packages/tensorrt_llm/_torch/pyexecutor/'
                'py_executor.py", line 2101, in _pad_attention_dp_dummy_request\n'
                "    assert self.expected_num_active_requests >= len(self.active_requests)\n"
                "AssertionError\n")


# The varied generator: a log written to differ from the project's simulator (its shapes from
# the public excerpts in ../shared/samples/real-logs and docs/adp-executor.md section 8), so a
# speed measured on it is not a speed tuned to our own writer.

#: The iteration fields it prints (V3's set with ``num_scheduled_requests: N``, plus
#: ``kv_cache_util`` on half the lines), ``iter`` always first and ``states`` always last (as
#: upstream prints them), the others in a new random order on every line.
VARIED_FIELDS = ("global_rank", "rank", "currank_total_requests", "host_step_time",
                 "prev_device_step_time", "timestamp", "num_scheduled_requests:",
                 "kv_cache_util")
_PY_FILES = ("tensorrt_llm/_torch/pyexecutor/py_executor.py",
             "tensorrt_llm/_torch/pyexecutor/resource_manager.py",
             "tensorrt_llm/_torch/pyexecutor/_util.py", "tensorrt_llm/executor/proxy.py",
             "tensorrt_llm/llmapi/utils.py", "torch/nn/modules/module.py")
_FUNCS = ("_executor_loop", "_prepare_and_schedule_batch", "_pad_attention_dp_dummy_request",
          "_forward_step", "__init__", "dispatch_result_task", "process_res", "_call_impl")
_CPP_SYMBOLS = ("tensorrt_llm::common::throwRuntimeError(char const*, int, char const*) + 76",
                "tensorrt_llm::batch_manager::kv_cache_manager::BlockManager::getFreeBlock(int, "
                "std::optional<std::chrono::duration<long, std::ratio<1l, 1000l> > >) + 220",
                "_PyEval_EvalFrameDefault + 21508", "PyObject_Vectorcall + 53",
                "/usr/lib/x86_64-linux-gnu/libc.so.6(+0x2a1ca) [0x79bed11c21ca]")


def _varied_iteration(rng: random.Random, it: int, rank: int, pre: str) -> str:
    vals = {
        "global_rank": str(rank), "rank": str(rank),
        "currank_total_requests": f"{it * 3 + rank}/{it * 24 + 8 + rng.randint(0, 7)}",
        "host_step_time": f"{rng.uniform(5, 450)!r}ms",
        "prev_device_step_time": "N/A" if rng.random() < 0.03 else f"{rng.uniform(5, 80)!r}ms",
        "timestamp": f"2026-11-30 12:{(it // 60) % 60:02d}:{it % 60:02d}",
        "num_scheduled_requests:": str(rng.randint(0, 64)),
        "kv_cache_util": "N/A" if rng.random() < 0.1 else f"{rng.random():.4f}",
    }
    names = [n for n in VARIED_FIELDS if n != "kv_cache_util" or rng.random() < 0.5]
    rng.shuffle(names)
    body = ", ".join(f"{n} {vals[n]}" if n.endswith(":") else f"{n} = {vals[n]}" for n in names)
    return (f"{pre}iter = {it}, {body}, states = {{'num_ctx_requests': {rng.randint(0, 4)}, "
            f"'num_ctx_tokens': {rng.randint(0, 8192)}, "
            f"'num_generation_tokens': {rng.randint(0, 64)}}}")


def _varied_other(rng: random.Random, it: int, rank: int, pre: str) -> list[str]:
    """One non-iteration item: a line, or the lines of a multi-line one (tracebacks)."""
    r = rng.random()
    req = 5000 + rng.randint(0, 9999)
    if r < 0.40:     # the C++ KV cache manager's warnings come in bursts (dynamo issue 5095)
        return [f"[TensorRT-LLM][WARNING] [kv cache manager] storeContextBlocks: Can not find "
                f"sequence for request {req + j % 2}" for j in range(rng.randint(1, 6))]
    if r < 0.47:
        return [rng.choice((f"[TensorRT-LLM][INFO] MPI size: 8, MPI local size: 8, rank: {rank}",
                            "[TensorRT-LLM][INFO] Engine version 1.2.0rc2 found in the config "
                            "file, assuming engine(s) built by new builder API."))]
    if r < 0.72:     # the Python logger's other lines
        sev, text = rng.choice((
            ("W", f"active_requests ({rng.randint(9, 65)}) exceeds expected_num_active_requests "
                  f"({rng.randint(8, 64)}); tolerating the ADP pad-dummy surplus"),
            ("W", f"Request {req} failed due to KV cache transfer timeout"),
            ("I", f"Skipped adding dummy requests: num_fetch_requests={rng.randint(0, 9)}, "
                  f"num_schedulable_requests={rng.randint(0, 9)}"),
            ("W", "Implicitly setting LLaMAConfig.use_last_layernorm = True"),
            ("I", f"Memory used after loading model weights (inside torch) in memory usage "
                  f"profiling: {rng.uniform(10, 70):.2f} GiB"),
            ("I", f"Setting PyTorch memory fraction to {rng.random():.4f}"),
            ("W", "Logger level already set from environment. Discard new verbosity: info"),
        ))
        return [f"{pre[:pre.index('[I]')]}[{sev}] {text}"]
    if r < 0.84:     # Python warnings: the warning line, then its source line indented
        mod = rng.choice(("torch/cuda/__init__.py", "transformers/utils/generic.py",
                          "tensorrt_llm/_torch/models/modeling_utils.py"))
        return [f"/usr/local/lib/python3.12/dist-packages/{mod}:{rng.randint(40, 900)}: "
                + rng.choice(("UserWarning: To copy construct from a tensor, it is recommended "
                              "to use sourceTensor.detach().clone()",
                              "FutureWarning: `torch.cuda.amp.autocast(args...)` is deprecated.",
                              "DeprecationWarning: the load_module() method is deprecated")),
                "  warnings.warn(",
                ] if rng.random() < 0.7 else [
                "<frozen importlib._bootstrap_external>:1184: FutureWarning: The cuda.cuda "
                "module is deprecated and will be removed in a future release, please switch "
                "to use the cuda.bindings.driver module instead."]
    if r < 0.95:     # a Python traceback (after an error line of the logger, most often)
        lines = []
        if rng.random() < 0.6:
            lines.append(f"{pre[:pre.index('[I]')]}[E] Error in event loop: "
                         f"request {req} not found")
        lines.append("Traceback (most recent call last):")
        for _ in range(rng.randint(2, 6)):
            lines.append(f'  File "/usr/local/lib/python3.12/dist-packages/'
                         f'{rng.choice(_PY_FILES)}", line {rng.randint(10, 2500)}, in '
                         f"{rng.choice(_FUNCS)}")
            code = rng.choice(("self._executor_loop()", "queue = self._results[client_id].queue",
                               "assert self.expected_num_active_requests >= "
                               "len(self.active_requests)", "return forward_call(*args, **kwargs)"))
            lines.append(f"    {code}")
            if rng.random() < 0.4:
                lines.append("    " + "^" * len(code))
        lines.append(rng.choice(("KeyError: None", "AssertionError",
                                 f"RuntimeError: [TensorRT-LLM][ERROR] Assertion failed: "
                                 f"value >= 0 (/src/tensorrt_llm/cpp/kvCacheIndex.h:{47 + it % 9})")))
        return lines
    # a C++ backtrace after its error line (trtllm issues 2708, 9263)
    lines = [f"[TensorRT-LLM][ERROR] Encountered an error in forwardAsync function: "
             f"[TensorRT-LLM][ERROR] Assertion failed: mNextBlocks.empty() "
             f"(/src/cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp:{200 + it % 99})"]
    for j in range(1, rng.randint(4, 12)):
        lines.append(f"{j:<8d}0x{rng.getrandbits(44):012x} {rng.choice(_CPP_SYMBOLS)}")
    return lines


def generate_varied(path: Path, size_mb: int, seed: int = 0, other_share: float = 0.10) -> None:
    """~size_mb of a log unlike the simulator's (a 32 MB unique chunk repeated): 8 ranks'
    iteration lines with the fields in a new order on every line, and ``other_share`` of the
    lines something else (C++ logger lines, the Python logger's warnings, Python warnings,
    tracebacks, C++ backtraces), items of several lines kept whole."""
    rng = random.Random(seed)
    lines: list[str] = []
    it = 0
    size = 0
    other = 0
    while size < min(32, size_mb) << 20:
        for rank in range(8):
            pre = (f"[11/30/2026-12:{(it // 60) % 60:02d}:{it % 60:02d}] [TRT-LLM] "
                   f"[RANK {rank}] [I] ")
            lines.append(_varied_iteration(rng, it, rank, pre))
            size += len(lines[-1]) + 1
            # keep the share of other lines near other_share of all lines
            while other < other_share * len(lines):
                item = _varied_other(rng, it, rank, pre)
                lines.extend(item)
                other += len(item)
                size += sum(len(x) + 1 for x in item)
        it += 1
    with open(path, "w") as f:
        _repeat_to_size(f, "\n".join(lines) + "\n", size_mb)


def generate_simulated(path: Path, size_mb: int, variant: str) -> None:
    """``forensics simulate --scenario fleet-1h`` sized to about ``size_mb`` of log."""
    iters = max(20, int(size_mb * 5000 / 57))        # 32 ranks x 5,000 iterations ~ 57 MB
    out = path.parent / "sim"
    subprocess.run([sys.executable, "-m", "forensics", "simulate", "--scenario", "fleet-1h",
                    "--iters", str(iters), "--log-format", variant, "-o", str(out)],
                   check=True, capture_output=True, cwd=path.parent)
    (out / "executor.log").rename(path)
    shutil.rmtree(out)


# --------------------------------------------------------------------------- baselines

NAIVE = '''"""The loop a user would write: one regex per line, dict rows, pandas, Parquet."""
import re, sys
import pandas as pd

RX = re.compile({regex!r})
FLOATS, STRINGS = {floats!r}, {strings!r}
rows = []
with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
    for n, line in enumerate(f, 1):
        m = RX.match(line.rstrip("\\n"))
        if m:
            d = m.groupdict()
            d["line"] = n
            rows.append(d)
df = pd.DataFrame(rows)
for c in df.columns:
    if c not in STRINGS and c != "line":
        df[c] = pd.to_numeric(df[c], errors="coerce")
        if c not in FLOATS:
            df[c] = df[c].astype("Int64")
df.to_parquet(sys.argv[2] + "/iterations.parquet", compression="zstd")
print(len(df))
'''

POLARS = '''"""polars, lazy: whole lines, filter, one extract_groups, casts, sink_parquet."""
import sys
import polars as pl

RX = {regex!r}
FLOATS, STRINGS, NAMES = {floats!r}, {strings!r}, {names!r}
lf = pl.scan_csv(sys.argv[1], has_header=False, separator="\\x1f", quote_char=None,
                 new_columns=["text"], schema_overrides={{"text": pl.String}}, infer_schema=False,
                 truncate_ragged_lines=True)
lf = lf.with_row_index("line", offset=1).filter(pl.col("text").str.contains("] iter = ", literal=True))
lf = lf.select("line", pl.col("text").str.extract_groups(RX).alias("g")).unnest("g")
lf = lf.filter(pl.col("iter").is_not_null()).with_columns(
    *(pl.col(c).cast(pl.Float64, strict=False) for c in NAMES if c in FLOATS),
    *(pl.col(c).cast(pl.Int64, strict=False) for c in NAMES if c not in FLOATS and c not in STRINGS))
lf.sink_parquet(sys.argv[2] + "/iterations.parquet", compression="zstd")
print(pl.scan_parquet(sys.argv[2] + "/iterations.parquet").select(pl.len()).collect().item())
'''

DUCKDB = '''"""duckdb: one VARCHAR column, regexp_extract into named groups, TRY_CAST, COPY TO parquet."""
import sys
import duckdb

RX = {regex!r}
FLOATS, STRINGS, NAMES = {floats!r}, {strings!r}, {names!r}
con = duckdb.connect()
con.execute("SET threads = 2")
casts = ", ".join(f"g.{{c}}" if c in STRINGS else
                  f"TRY_CAST(g.{{c}} AS {{'DOUBLE' if c in FLOATS else 'BIGINT'}}) AS {{c}}" for c in NAMES)
names = ", ".join("'" + c + "'" for c in NAMES)
src = (f"read_csv('{{sys.argv[1]}}', columns = {{{{'text': 'VARCHAR'}}}}, delim = '\\x1f', quote = '', "
       "escape = '', header = false, auto_detect = false, strict_mode = false, null_padding = true)")
rx = RX.replace("'", "''")
con.execute(f"""COPY (SELECT {{casts}} FROM (
    SELECT regexp_extract(text, '{{rx}}', [{{names}}]) AS g FROM {{src}} WHERE text LIKE '%] iter = %')
    WHERE g.iter <> '') TO '{{sys.argv[2]}}/iterations.parquet' (FORMAT parquet, COMPRESSION zstd)""")
print(con.execute(f"SELECT count(*) FROM '{{sys.argv[2]}}/iterations.parquet'").fetchone()[0])
'''


# The same three baselines for the varied log: its fields come in any order, so one regex of
# the whole line cannot read it; what a user writes instead is a head regex (the logger prefix
# and ``iter``) and one regex of the ``name = value`` / ``name: value`` pairs (the loop), or one
# extract per field (polars, duckdb).

#: Per column of the varied log: its value's regex (one group, the unit outside it) and its
#: kind (``f`` float, ``i`` integer, ``s`` string).
VARIED_VALUES = {
    "global_rank": (r"(\d+)", "i"), "rank": (r"(\d+)", "i"),
    "num_scheduled_requests": (r"(\d+)", "i"), "kv_cache_util": (r"([0-9.]+)", "f"),
    "currank_requests": (r"(\d+)/\d+", "i"), "total_requests": (r"\d+/(\d+)", "i"),
    "host_step_time": (r"([0-9.]+)ms", "f"), "prev_device_step_time": (r"([0-9.]+)ms", "f"),
    "timestamp": (r"([0-9: -]+)", "s"), "num_ctx_requests": (r"(\d+)", "i"),
    "num_ctx_tokens": (r"(\d+)", "i"), "num_generation_tokens": (r"(\d+)", "i"),
}
_VARIED_HEAD = (r"^\[(?P<log_time>[^\]]+)\] \[TRT-LLM\] \[RANK (?P<prefix_rank>\d+)\] "
                r"\[(?P<severity>[A-Z])\] iter = (?P<iter>\d+)")


def field_regex(column: str) -> str:
    """The regex of one column's value wherever its field is in the line (``name = v`` or
    ``name: v``, ``'name': v`` in the states dict); group 1 is the value."""
    name = {"currank_requests": "currank_total_requests",
            "total_requests": "currank_total_requests"}.get(column, column)
    return rf"\b{name}'?(?: =|:) {VARIED_VALUES[column][0]}"


NAIVE_VARIED = """\"\"\"The loop a user would write for fields in any order: a head regex, then one regex of
the name/value pairs (findall), dict rows, pandas, Parquet.\"\"\"
import re, sys
import pandas as pd

HEAD = re.compile({head!r})
PAIR = re.compile(r"'?(\\w+)'?(?: =|:) ([^,{{}}]+)")
rows = []
with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
    for n, line in enumerate(f, 1):
        m = HEAD.match(line)
        if m:
            d = m.groupdict()
            d.update(PAIR.findall(line, m.end()))
            d["line"] = n
            rows.append(d)
df = pd.DataFrame(rows)
df[["currank_requests", "total_requests"]] = df.pop("currank_total_requests").str.split("/", expand=True)
for c in ("host_step_time", "prev_device_step_time"):
    df[c] = df[c].str.removesuffix("ms")
for c in df.columns:
    if c not in ("log_time", "severity", "timestamp", "line"):
        df[c] = pd.to_numeric(df[c], errors="coerce")
        if c not in {floats!r}:
            df[c] = df[c].astype("Int64")
df.to_parquet(sys.argv[2] + "/iterations.parquet", compression="zstd")
print(len(df))
"""

POLARS_VARIED = """\"\"\"polars, lazy, fields in any order: whole lines, filter, the head's groups, one
extract per field, casts, sink_parquet.\"\"\"
import sys
import polars as pl

HEAD, FIELDS, KINDS = {head!r}, {fields!r}, {kinds!r}
lf = pl.scan_csv(sys.argv[1], has_header=False, separator="\\x1f", quote_char=None,
                 new_columns=["text"], schema_overrides={{"text": pl.String}}, infer_schema=False,
                 truncate_ragged_lines=True)
lf = lf.with_row_index("line", offset=1).filter(pl.col("text").str.contains("] iter = ", literal=True))
t = pl.col("text")
lf = lf.select("line", t.str.extract_groups(HEAD).alias("h"),
               *(t.str.extract(rx, 1).alias(c) for c, rx in FIELDS.items())).unnest("h")
typ = {{"f": pl.Float64, "i": pl.Int64}}
lf = lf.filter(pl.col("iter").is_not_null()).with_columns(
    pl.col("iter").cast(pl.Int64), pl.col("prefix_rank").cast(pl.Int64),
    *(pl.col(c).cast(typ[k], strict=False) for c, k in KINDS.items() if k in typ))
lf.sink_parquet(sys.argv[2] + "/iterations.parquet", compression="zstd")
print(pl.scan_parquet(sys.argv[2] + "/iterations.parquet").select(pl.len()).collect().item())
"""

DUCKDB_VARIED = """\"\"\"duckdb, fields in any order: one VARCHAR column, the head's groups and one
regexp_extract per field, TRY_CAST, COPY TO parquet.\"\"\"
import sys
import duckdb

HEAD, FIELDS, KINDS = {head!r}, {fields!r}, {kinds!r}
con = duckdb.connect()
con.execute("SET threads = 2")
q = lambda s: s.replace("'", "''")
typ = {{"f": "DOUBLE", "i": "BIGINT"}}
head = ("h.log_time, TRY_CAST(h.prefix_rank AS BIGINT) AS prefix_rank, h.severity, "
        "TRY_CAST(NULLIF(h.iter, '') AS BIGINT) AS iter")
cols = ", ".join(f"TRY_CAST(NULLIF(regexp_extract(text, '{{q(rx)}}', 1), '') AS "
                 f"{{typ.get(KINDS[c], 'VARCHAR')}}) AS {{c}}" for c, rx in FIELDS.items())
src = (f"read_csv('{{sys.argv[1]}}', columns = {{{{'text': 'VARCHAR'}}}}, delim = '\\x1f', quote = '', "
       "escape = '', header = false, auto_detect = false, strict_mode = false, null_padding = true)")
con.execute(f\"\"\"COPY (SELECT * FROM (SELECT {{head}}, {{cols}} FROM (SELECT text, regexp_extract(text,
    '{{q(HEAD)}}', ['log_time', 'prefix_rank', 'severity', 'iter']) AS h FROM {{src}}
    WHERE text LIKE '%] iter = %')) WHERE iter IS NOT NULL) TO '{{sys.argv[2]}}/iterations.parquet' (FORMAT parquet, COMPRESSION zstd)\"\"\")
print(con.execute(f"SELECT count(*) FROM '{{sys.argv[2]}}/iterations.parquet'").fetchone()[0])
"""


def write_varied_baselines(work: Path) -> dict[str, Path]:
    """The baseline scripts for the varied log (fields in any order), in ``work``."""
    fill = dict(head=_VARIED_HEAD, floats=FLOATS,
                fields={c: field_regex(c) for c in VARIED_VALUES},
                kinds={c: k for c, (_, k) in VARIED_VALUES.items()})
    out = {}
    for name, src in (("naive", NAIVE_VARIED), ("polars", POLARS_VARIED),
                      ("duckdb", DUCKDB_VARIED)):
        p = work / f"baseline_{name}_varied.py"
        p.write_text(src.format(**fill))
        out[name] = p
    return out


def write_baselines(work: Path, variant: str) -> dict[str, Path]:
    regex = iteration_regex(variant)
    names = [n for n in group_names(variant)]
    fill = dict(regex=regex, floats=FLOATS, strings=STRINGS, names=names)
    out = {}
    for name, src in (("naive", NAIVE), ("polars", POLARS), ("duckdb", DUCKDB)):
        p = work / f"baseline_{name}_{variant}.py"
        p.write_text(src.format(**fill))
        out[name] = p
    return out


def generate(gen: str, path: Path, size_mb: int, variant: str) -> None:
    """The log of generator ``gen`` (``bench``, ``simulate``, ``varied``) at ``path``."""
    if gen == "bench":
        generate_bench(path, size_mb, variant)
    elif gen == "simulate":
        generate_simulated(path, size_mb, variant)
    elif gen == "varied":
        generate_varied(path, size_mb)
    else:
        raise SystemExit(f"unknown generator {gen!r} (bench, simulate, varied)")


#: The goals of ours against the baselines, CPU time (issue 28): ratio of the baseline's median
#: CPU to ours.
GOALS = {"naive": 8.0, "polars": 3.0}


def goals(summary: list[tuple[str, float, list]]) -> str:
    """One line per generator: ours' CPU ratio to each goal's baseline, and whether it holds."""
    out = ["goals (cpu, baseline / ours): " + ", ".join(f"{m} >= {g:g}x" for m, g in GOALS.items())]
    for gen, mb, methods in summary:
        by = {m.name: m for m in methods}
        for who in ("before", "ours"):
            if who not in by:
                continue
            ours = by[who].median("cpu")
            parts = []
            for name, goal in GOALS.items():
                if name in by:
                    r = by[name].median("cpu") / ours
                    parts.append(f"{name} {r:5.2f}x ({'met' if r >= goal else 'NOT met'})")
            out.append(f"  {gen:<9s} {mb:6.0f} MB  {who:<6s} {ours:6.2f} s cpu, "
                       f"{by[who].median('rss_mib'):5.0f} MiB; " + ", ".join(parts))
    return "\n".join(out)


def _rows_of_ours(ds: Path, env: dict) -> int:
    """Iteration rows of our dataset, read in a subprocess (this process stays small)."""
    code = ("import sys, forensics; print(len(forensics.load(sys.argv[1]).iterations))")
    return int(subprocess.run([sys.executable, "-c", code, str(ds)], capture_output=True,
                              text=True, check=True, env=env, cwd=ds.parent).stdout.split()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=64, help="log size per generator (default 64)")
    ap.add_argument("--generators", default="bench,simulate,varied")
    ap.add_argument("--variant", default="V4", choices=sorted(VARIANTS))
    ap.add_argument("--methods", default="ours,naive,polars,duckdb,cat,grep")
    ap.add_argument("--rounds", type=int, default=3, help="paired rounds (medians reported)")
    ap.add_argument("--workdir", help="keep the log, the baseline scripts and outputs here")
    ap.add_argument("--before", metavar="CHECKOUT",
                    help="also run ours from this checkout (method 'before', e.g. a worktree of "
                         "main): a change's before and after in the same paired rounds")
    ap.add_argument("--flat-mb", type=int, default=0,
                    help="also run ours once on a log of this size (same generator, the native "
                         "path forced on both) and print the peak-RSS ratio (flat = 1.0)")
    args = ap.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="ingest-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    # every method with its bytecode warm (the warm-up run below fills the cache for ours)
    env = wp.warm_bytecode(dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]), POLARS_MAX_THREADS="2"),
        work / "pycache")
    envs = {"ours": env}
    if args.before:
        envs["before"] = wp.warm_bytecode(dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(Path(args.before).resolve()), *filter(None, [os.environ.get("PYTHONPATH")])]),
            POLARS_MAX_THREADS="2"), work / "pycache")
    try:
        fixed = write_baselines(work, args.variant)
        varied = write_varied_baselines(work)
        summary = []
        for gen in args.generators.split(","):
            scripts = varied if gen == "varied" else fixed
            variant = "mixed" if gen == "varied" else args.variant
            log = work / f"{gen}-{variant}-{args.size_mb}MB.log"
            if log.exists():   # a work directory's logs are reused (delete one to regenerate)
                print(f"reusing {log}", flush=True)
            else:
                generate(gen, log, args.size_mb, args.variant)
            mb = log.stat().st_size / 1e6
            print(f"--- generator {gen}, variant {variant}: {mb:.0f} MB ({log})", flush=True)
            out = {m: work / f"out-{gen}-{m}" for m in ("ours", "before", "naive", "polars",
                                                         "duckdb")}

            def fresh(d: Path) -> None:
                shutil.rmtree(d, ignore_errors=True)
                if d.name.split("-")[-1] not in envs:
                    d.mkdir()

            argv = {
                **{m: [sys.executable, "-m", "forensics", "ingest", str(log), "-o",
                       str(out[m]), "-q"] for m in envs},
                **{m: [sys.executable, str(scripts[m]), str(log), str(out[m])]
                   for m in ("naive", "polars", "duckdb")},
                "cat": ["sh", "-c", f"cat '{log}' > /dev/null"],
                "grep": ["grep", "-c", "iter = ", str(log)],
            }
            names = args.methods.split(",")
            if "before" in envs and "before" not in names:
                names.insert(names.index("ours") + 1 if "ours" in names else 0, "before")
            methods = [wp.Method(m, argv[m], env=envs.get(m, env),
                                 prepare=(lambda d=out[m]: fresh(d)) if m in out else None)
                       for m in names]
            for e in envs.values():
                wp.ready_scanners(e)
            for m in methods:
                if m.name in envs:   # untimed: a fresh install compiles numba's cache here
                    m.prepare()
                    s = wp.measure(m.argv, m.env, str(work))
                    print(f"  warm-up: {m.name} {s.wall:.2f} s wall {s.cpu:.2f} s cpu "
                          f"{s.rss_mib:.0f} MiB (not counted)", flush=True)
            wp.run_rounds(methods, args.rounds, cwd=str(work))
            counts = {}
            for m in methods:
                if m.name in envs:
                    counts[m.name] = _rows_of_ours(out[m.name], envs[m.name])
                elif m.name in out or m.name == "grep":
                    counts[m.name] = int(m.samples[-1].stdout.split()[-1])
            print("iteration rows:", json.dumps(counts))
            print(wp.table(methods, mb), flush=True)
            summary.append((gen, mb, methods))
            if args.flat_mb and "ours" in argv:
                small = work / f"{gen}-{variant}-{args.flat_mb}MB.log"
                if not small.exists():
                    generate(gen, small, args.flat_mb, args.variant)
                forced = dict(env, FORENSICS_INGEST_PATH="native")
                rss = []
                for lg in (small, log):
                    fresh(out["ours"])
                    rss.append(wp.measure([*argv["ours"][:4], str(lg), *argv["ours"][5:]],
                                          forced, str(work)).rss_mib)
                print(f"peak RSS of ours, {small.stat().st_size / 1e6:.0f} MB -> {mb:.0f} MB "
                      f"(x{log.stat().st_size / small.stat().st_size:.1f} input): "
                      f"{rss[0]:.0f} -> {rss[1]:.0f} MiB, ratio {rss[1] / rss[0]:.2f}", flush=True)
        print(goals(summary), flush=True)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
