"""Tracebacks and C++ backtraces read whole by the compiled scanner
(``forensics.readers.native_events``, ``compiled/event_kernel.py``) against the line-by-line
reader.

Every table of a parse must equal the reference path's, row for row: on hand-worked shapes (each
with whether the compiled pass takes it: else the comparison proves nothing), on mutated
tracebacks between iteration lines, at several block sizes. A kernel broken on purpose (an
event a line short, a wrong kind, a frame's source lost, a message cut a byte late) must fail
that comparison.
"""
from __future__ import annotations

import ctypes
import random
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics.readers import native_events, native_scan
from forensics.readers.analysed_block import Scanned, analyse

from .test_native_scan import _GOOD, _bench_module, _parse, assert_same

pytestmark = pytest.mark.skipif(native_scan.kernel() is None, reason="numba not importable")


@pytest.fixture(autouse=True)
def every_block(monkeypatch):
    """Events are made in blocks with any number of them (not only in blocks with many)."""
    monkeypatch.setattr(native_events, "MIN_EVENTS", 1)

IT = _GOOD[0]   # an iteration line the scan takes
LOGGER = "[11/30/2026-12:00:01] [TRT-LLM] [RANK 3] [E] Error in event loop: request 7 not found"
TB = "Traceback (most recent call last):"
FRAME = '  File "/usr/lib/python3.12/site-packages/tensorrt_llm/executor/proxy.py", line 12, in f'
CODE = "    queue = self._results[client_id].queue"

# (lines, events the compiled pass takes whole)
SHAPES = [
    ([TB, FRAME, CODE, "    ^^^^^", "KeyError: None"], 1),
    ([TB, '  File "a.py", line 3, in _pad_attention_dp_dummy_request', "    x = 1",
      "AssertionError"], 1),                                     # adp_assert by its function
    ([TB, FRAME, "    assert self.expected_num_active_requests >= len(self.active_requests)",
      "AssertionError: boom"], 1),                               # adp_assert by its source
    ([TB, '  File "C:\\tensorrt_llm\\x.py", line 9, in g', "    y()",
      '  File "b.py"', '  File "c.py", in h', "    ^~~~", "    z()",
      "RuntimeError:no space"], 1),                              # backslashes, missing parts
    ([TB, "    before any frame", FRAME, "    ^^^", "    after carets", "    ignored",
      "KeyError:"], 1),
    ([TB, FRAME, CODE, "ValueError: x", LOGGER], 1),             # ends at a logger line
    ([TB, FRAME, "KeyError: 1", TB, FRAME, "KeyError: 2"], 2),   # back to back
    ([TB, FRAME, "KeyError: 1", "", ("During handling of the above exception, another "
                                      "exception occurred:"), "", TB, FRAME, "KeyError: 2"], 1),  # a chain: its second
    # traceback is made, and not used: the first one's reading claims it before
    ([TB, FRAME, "KeyError: 1", "  "], 0),                       # blank after it
    ([TB, FRAME, "\tx = 1", "KeyError: 1"], 0),                  # a tab
    ([TB, FRAME, "    x = 'é'", "KeyError: 1"], 0),              # not ASCII
    ([TB, "  | " + FRAME.strip(), "  | KeyError: 1", "  +------", "ExceptionGroup: g"], 0),
    ([TB, FRAME, ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
                  "GPU 0 has a total capacity of 79.15 GiB of which 1.23 GiB is free.")],
     0),                                                         # typed: cuda_oom
    ([TB, FRAME, '    open(File "x")', "KeyError: 1"], 0),      # File " in source
    ([TB, FRAME, "    iter = 5, rank = 1", "KeyError: 1"], 0),   # reads as an iteration line
    ([TB, '  File "a.py", line 12345678901234567890, in f', "KeyError: 1"], 0),
    ([TB, FRAME, "NotAnException here"], 0),
    ([TB, FRAME, "Error"], 0),                                   # a bare ending is no type
    (["1       0x7f492ab87384 tensorrt_llm::common::throwRuntimeError",
      "2       0x7f492ab87385 _PyEval_EvalFrameDefault + 21508"], 1),
    (["1       0x7f492ab87384 a", "[TensorRT-LLM][ERROR] 2       0x7f492ab87385 b"], 0),
    (["1       0x7f492ab87384 CUDA out of memory. Tried to allocate 2.00 GiB"], 0),
    (["1       0x7f492ab87384 a", "2\t0x7f492ab87385 b"], 0),   # a tab: left to the reader
]


def _made(path: Path) -> int:
    """Events the compiled pass makes when the file is one block."""
    got = analyse(path.read_bytes(), "x", native=True)
    return len(got.made.first) if isinstance(got, Scanned) and got.made else 0


def _log(tmp: Path, shapes: list[list[str]], end: bool = True) -> Path:
    lines = [IT]
    for s in shapes:
        lines += [*s, IT]
    path = tmp / "events.log"
    path.write_text("\n".join(lines if end else lines[:-1]) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("k", range(len(SHAPES)))
def test_hand_worked_shapes(tmp_path, k):
    lines, made = SHAPES[k]
    path = _log(tmp_path, [lines])
    assert _made(path) == made
    for block in (1 << 20, 97):
        assert_same(path, block_bytes=block)


def test_kinds_and_frames_of_made_events(tmp_path):
    """The rows of the made events, hand-worked (the comparison above checks every value)."""
    path = _log(tmp_path, [s for s, n in SHAPES[:4]])
    assert _made(path) == 4
    t = _parse(path, True)
    ev = [r for r in t["events"].to_pylist() if r["kind"] != "log"]
    assert [r["kind"] for r in ev] == ["traceback", "adp_assert", "adp_assert", "traceback"]
    assert [r["exception_type"] for r in ev] == ["KeyError", "AssertionError",
                                                 "AssertionError", "RuntimeError"]
    assert [r["message"] for r in ev] == ["None", None, "boom", "no space"]
    assert ev[0]["executor_file"] == ev[0]["innermost_file"] and ev[0]["innermost_line"] == 12
    assert ev[3]["executor_file"] == "C:\\tensorrt_llm\\x.py" and ev[3]["executor_line"] == 9
    assert ev[3]["innermost_function"] == "h" and ev[3]["innermost_line"] is None
    fr = [r for r in t["traceback_frames"].to_pylist() if r["line"] == ev[3]["line"]]
    assert [(r["file"], r["file_line"], r["function"], r["code"]) for r in fr] == [
        ("C:\\tensorrt_llm\\x.py", 9, "g", "y()"), ("b.py", None, None, None),
        ("c.py", None, "h", "z()")]
    assert ev[0]["text"] == "\n".join(SHAPES[0][0])


def test_few_events_are_left_to_the_line_by_line_reading(tmp_path, monkeypatch):
    path = _log(tmp_path, [SHAPES[0][0], SHAPES[18][0]])
    assert _made(path) == 2
    monkeypatch.setattr(native_events, "MIN_EVENTS", 3)
    assert _made(path) == 0
    assert_same(path)


def test_last_line_of_the_input(tmp_path):
    """A traceback on the input's last lines stays open (the next block may continue it)."""
    path = _log(tmp_path, [SHAPES[0][0]], end=False)
    assert _made(path) == 0
    assert_same(path)


def test_varied_generator_events_are_made(tmp_path):
    """Every traceback and C++ backtrace of the benchmark's varied log is made whole."""
    log = tmp_path / "varied.log"
    _bench_module().generate_varied(log, 1)
    new = assert_same(log, block_bytes=1 << 20)
    kinds = new["events"].column("kind").to_pylist()
    whole = sum(k in ("traceback", "adp_assert", "cpp_backtrace") for k in kinds)
    assert whole > 10 and _made(log) == whole


_PIECES = [TB, FRAME, CODE, "    ^^^^", "KeyError: None", "AssertionError", "", "  ", "\t",
           "During handling of the above exception, another exception occurred:", LOGGER,
           '  File "a.py"', '  File "a.py", line 1', "  | x", "  + y", "    iter = 1,",
           "1  0xabc f", "2  0xdef g", "é", "RuntimeError: CUDA out of memory", "Error",
           "    x  ", "[TensorRT-LLM][WARNING] w", "0: " + FRAME, IT]


@settings(suppress_health_check=list(HealthCheck), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 30), block=st.sampled_from([97, 1 << 20]))
def test_mutated_tracebacks(seed, n, block):
    """Tracebacks and backtraces built from pieces (some cut or joined) between iteration
    lines: the same tables as the reference path."""
    rng = random.Random(seed)
    lines = [IT]
    for _ in range(n):
        if rng.random() < 0.4:
            lines += [TB, *(rng.choice([FRAME, CODE, "    ^^"]) for _ in range(rng.randrange(4))),
                      rng.choice(["KeyError: 1", "AssertionError", "x"])]
        piece = rng.choice(_PIECES)
        if rng.random() < 0.3 and piece:
            at = rng.randrange(len(piece) + 1)
            piece = piece[:at] + rng.choice(["", " ", '"', ",", ":", "0x1 "]) + piece[at:]
        lines.append(piece)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "tb.log"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        assert_same(path, block_bytes=block)


def _broken(real, how: str):
    """The compiled pass with its output spoiled after the call (``how``)."""
    rows = native_events.EV_ROWS

    def events(buf, n, n_lines, m, line, starts, ends, shape, boff, ev, cap_ev, fr, cap_fr, out):
        got = real(buf, n, n_lines, m, line, starts, ends, shape, boff, ev, cap_ev, fr, cap_fr,
                   out)
        k, f = (ctypes.c_int64 * 2).from_address(out)
        e = np.ctypeslib.as_array((ctypes.c_int64 * (rows * cap_ev)).from_address(ev))\
            .reshape(rows, cap_ev)
        g = np.ctypeslib.as_array((ctypes.c_int64 * (native_events.FR_ROWS * cap_fr))
                                  .from_address(fr)).reshape(native_events.FR_ROWS, cap_fr)
        if how == "short" and k:
            e[1, k - 1] -= 1        # the last event (a C++ backtrace) ends a line early
        elif how == "kind" and k:
            e[2, 0] = 1 - e[2, 0]   # a traceback read as the pad-dummy assert
        elif how == "source" and f:
            g[6, 0] = g[7, 0] = -1  # the first frame's source line lost
        elif how == "message":
            e[4, :k][e[4, :k] >= 0] += 1   # every message starts a byte late
        return got

    return events


@pytest.mark.parametrize("how", ["short", "kind", "source", "message"])
def test_a_broken_kernel_fails_the_comparison(tmp_path, monkeypatch, how):
    path = _log(tmp_path, [SHAPES[0][0], SHAPES[3][0], SHAPES[18][0]])
    assert_same(path)
    entry = native_scan.kernel()
    monkeypatch.setattr(native_scan, "_kernel", {**entry, "events": _broken(entry["events"], how)})
    with pytest.raises(AssertionError):
        assert_same(path)
