"""Mutated executor logs for fuzzing the log reader (the suite's bounded run in
``test_fuzz.py``, long runs in ``benchmarks/fuzz.py``).

Inputs are built from every documented line variant (:mod:`log_lines`), from the log-stack
shapes of issue 13 (collector exports, pdsh, chained tracebacks, CUDA/NCCL failures) and, when
given, from real sample lines; then corrupted the ways real logs are: values replaced by huge
or odd numbers, cuts, dropped or doubled separators, repeated fields, NUL runs, invalid UTF-8,
indentation, stray wrappers, over-long lines.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

from . import log_lines

NASTY_VALUES = ["99999999999", "99999999999999999999", "2147483648", "3000000000", "-1", "0x10",
                "nan", "inf", "1e400", "1.5.2", "", "N/A", "12ms", "3/", "/4", "1/2/3", "{", "}",
                "'", "=", ":", "\u00e9", "\x00", "9" * 40]
WRAPPERS = ["2025-12-04T22:23:18.869123456Z ", "2025-12-04T22:23:18+0000 node07 python3[42]: ",
            "\t2025-12-04 22:23:18.869\t", "node07: ", "3: ", "[1,99999999999]<stderr>:",
            "99999999999: ", "> ", "    ", "  ", "[RANK 2147483648] "]
SHAPES = [
    "Exception in thread Thread-3 (_event_loop_wrapper):",
    "[11/30/2026-12:00:01] [TRT-LLM] [RANK 0] [E] Traceback (most recent call last):",
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
    '  File "/x/tensorrt_llm/_torch/pyexecutor/py_executor.py", line 99999999999999999999, in f',
    "    ^^^^^^^^^^^^",
    "RuntimeError: CUDA error: device-side assert triggered",
    ("/pytorch/aten/src/ATen/native/cuda/TensorCompare.cu:112: _assert_async_cuda_kernel: "
     "block: [0,0,0], thread: [0,0,0] Assertion `x` failed."),
    ("[Rank 2147483648] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, "
     "OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=600000) ran for 600081 milliseconds "
     "before timing out."),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
     "capacity of 79.15 GiB of which 1.23 GiB is free."),
    "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined.",
    "[11/30/2026-12:00:01] [TRT-LLM] [E] Disagg KV cache transfer error: rank=2147483648, local_err_count=3",
    "  [TensorRT-LLM][WARNING] CacheTransceiver: wrapped over",
    "  three lines of text",
    "",
]


def variant_lines(rng: random.Random) -> list[str]:
    """Lines of one random piece: a documented variant or an issue-13 shape."""
    if rng.random() < 0.7:
        return list(rng.choice(log_lines.every_piece(rank=rng.randrange(4))).lines)
    return [rng.choice(SHAPES)]


def docker(line: str, rng: random.Random) -> str:
    # a lone surrogate in the record: json.dumps writes it as the escape "\\udcff"
    rec = {"log": line + rng.choice(["", "", "\udcff"]) + "\n",
           "stream": rng.choice(["stdout", "stderr"]),
           "time": "2025-12-04T22:23:18.869123456Z"}
    return json.dumps(rec)


def mutate(line: str, rng: random.Random) -> str:
    """One corruption of ``line``."""
    choice = rng.randrange(12)
    if choice == 0 and " = " in line:                      # replace one value
        head, _, tail = line.partition(" = ")
        end = tail.find(",")
        return f"{head} = {rng.choice(NASTY_VALUES)}{tail[end:] if end >= 0 else ''}"
    if choice == 1:                                        # cut anywhere
        return line[: rng.randrange(len(line) + 1)]
    if choice == 2:                                        # drop a separator
        return line.replace(", ", ",", 1) if rng.random() < 0.5 else line.replace(" = ", "=", 1)
    if choice == 3 and ", " in line:                       # repeat a field
        parts = line.split(", ")
        i = rng.randrange(len(parts))
        return ", ".join(parts[: i + 1] + [parts[i]] + parts[i + 1:])
    if choice == 4:                                        # a digit becomes a nasty value
        return line.replace(str(rng.randrange(10)), rng.choice(NASTY_VALUES), 1)
    if choice == 5:                                        # a NUL run
        at = rng.randrange(len(line) + 1)
        return line[:at] + "\x00" * rng.randrange(1, 64) + line[at:]
    if choice == 6:                                        # a stray wrapper
        return rng.choice(WRAPPERS) + line
    if choice == 7:                                        # Docker json-file record
        return docker(line, rng)
    if choice == 8:                                        # odd characters
        at = rng.randrange(len(line) + 1)
        return line[:at] + rng.choice(["\r", "\t", "\u2028", "\ufeff", "\udcff", "{", "[", "|"]) + line[at:]
    if choice == 9:                                        # a long line
        return line + "x" * rng.choice([100, 5000, 70000])
    if choice == 10:                                       # deep JSON
        d = rng.choice([10, 3000])
        return '{"log": ' * d + "1" + "}" * d
    return line


def fuzz_log(rng: random.Random, samples: list[str] = (), n_lines: int = 40) -> bytes:
    """A mutated log of about ``n_lines`` lines (bytes: may hold invalid UTF-8)."""
    lines: list[str] = []
    while len(lines) < n_lines:
        if samples and rng.random() < 0.3:
            i = rng.randrange(len(samples))
            piece = list(samples[i:i + rng.randrange(1, 12)])
        else:
            piece = variant_lines(rng)
        wrap = rng.choice(WRAPPERS) if rng.random() < 0.2 else ""
        for ln in piece:
            ln = wrap + ln
            lines.append(mutate(ln, rng) if rng.random() < 0.5 else ln)
    text = "\n".join(lines) + ("\n" if rng.random() < 0.8 else "")
    data = text.encode("utf-8", errors="surrogateescape" if rng.random() < 0.5 else "replace")
    if rng.random() < 0.1:
        data = b"\0" * rng.randrange(1, 5000) + data       # logrotate copytruncate
    if rng.random() < 0.1:
        at = rng.randrange(len(data) + 1)
        data = data[:at] + b"\xff\xfe\x80" + data[at:]     # invalid UTF-8
    return data


def n_lines(data: bytes) -> int:
    """Lines the reader must account for (a final line without newline counts)."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def sample_lines(shared: Path) -> list[str]:
    """Lines of the shared real samples (empty when absent)."""
    real = shared / "samples" / "real-logs"
    if not real.is_dir():
        return []
    return [ln for p in sorted(real.glob("*.txt"))
            for ln in p.read_text(errors="replace").splitlines()]
