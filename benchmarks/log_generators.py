"""The logs the ingest benchmark reads (``benchmarks/ingest.py``; the ingest tests generate
small ones too): ``bench`` and ``simulate`` write the simulator's line layout of one
iteration-line variant; ``varied`` is built to differ from it (fields in a new order on every
line, colons, ~10 % warnings, tracebacks and C++ backtraces). Also the variants' field orders
and the one whole-line regex of each, which the baselines (``ingest_baselines``) use.
"""
from __future__ import annotations

import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

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
