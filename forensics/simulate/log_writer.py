"""The executor log of a simulated run, as the modelled build prints it (domain doc §8).

What is written, in the order the executor prints it:

* the iteration line of each loop body, at the top of the *next* body (so its ``iter`` is one
  more than the stats ``iter`` of the same body; the last body of a run and the crash body have
  no line), in one of the variants V1-V5, by rank 0 only or by every rank;
* the pad step's warnings of a body, after the line of the body before: the PR #17278 surplus
  warning, the PR #16161 "Cannot allocate ... pad dummy" warning and the KV-capacity precheck's
  "Unable to fit ..." (pad step) or "... cannot afford even a padding dummy ..." (post-schedule
  pad) warning, by the rank that warns;
* on a crash, each dying rank's ``Error in event loop`` error with the traceback logged by
  ``_event_loop_wrapper``, then the thread's own ``Exception in thread ... (_event_loop_wrapper):``
  traceback.

Times are fake and deterministic (derived from the seed and the iteration), never the wall clock.
"""
from __future__ import annotations

import io
import time
from collections.abc import Iterable, Mapping

from forensics.errors import ConfigError
from forensics.dataset import log_fields
from forensics.simulate.run_loop import Body
from replay.step import CRASH_ASSERT

#: Iteration-line variants (domain doc §8).
LOG_FORMATS = log_fields.FORMATS
#: Launcher wrappers: none, ``srun --label`` (``3: ``) or ``mpirun --tag-output`` (``[1,3]<stdout>:``).
LAUNCHERS = (None, "srun", "mpirun")
#: Logger prefix styles: ``[RANK n]`` (default), none (single-process builds), ``[MPI_Rank n]``
#: (2023 builds), ``[_torch][RANK n]`` after the severity (2026 builds).
PREFIX_STYLES = ("rank", "single", "mpi_rank", "torch")

_PKG = "/usr/local/lib/python3.12/dist-packages/tensorrt_llm/_torch/pyexecutor/py_executor.py"
_THREADING = "/usr/lib/python3.12/threading.py"
#: Frames of the executor thread down to the pad step (file, line, function, source line). The
#: line numbers are fictitious; the function names and the assert are the upstream ones (§1).
_LOOP_FRAMES = (
    (_PKG, 368, "_event_loop_wrapper", "self.event_loop()"),
    (_PKG, None, None, "scheduled_batch, iter_stats = self._prepare_and_schedule_batch()"),
    (_PKG, 2297, "_prepare_and_schedule_batch", "self._pad_attention_dp_dummy_request()"),
)
_ASSERT_FRAME = (_PKG, 2581, "_pad_attention_dp_dummy_request",
                 "assert self.expected_num_active_requests >= len(self.active_requests)")
_ALLOC_FRAME = (_PKG, 2603, "_pad_attention_dp_dummy_request",
                "llm_request = self.kv_cache_manager.add_dummy_requests(request_ids=[0])[0]")


def parse_log_ranks(spec: str | Iterable[int]) -> str | tuple[int, ...]:
    """``"all"``, or the ranks that print iteration lines (``"0"``, ``"0,1,3"``, ``[0, 2]``)."""
    if isinstance(spec, str):
        if spec.strip().lower() == "all":
            return "all"
        try:
            return tuple(sorted({int(x) for x in spec.split(",") if x.strip()}))
        except ValueError:
            raise ConfigError(f"log ranks must be 'all' or comma-separated ranks, got {spec!r}") from None
    return tuple(sorted({int(x) for x in spec}))


def iteration_line(fmt: str, iteration: int, values: Mapping[str, object],
                   fields: tuple[log_fields.Field, ...] = log_fields.ITERATION_FIELDS) -> str:
    """An iteration line's text (no logger prefix) as format ``fmt`` prints it: ``iter`` then
    the fields the format prints (:func:`~forensics.dataset.log_fields.printed`), each
    ``name<sep><value><unit>``, the ``states`` keys as a dict repr, last.

    Args:
        fmt: ``V1`` .. ``V5``.
        iteration: the ``iter`` value.
        values: each field's value by name, as printed without its unit (``str()`` of it);
            ``"N/A"`` (no unit) for none; a field without a value is printed ``N/A``.
        fields: the field table.

    Example: ``iteration_line("V2", 7, {"global_rank": 1, "rank": 1, "elapsed_time": 0.5,
    "currank_total_requests": "3/4", "timestamp": "2025-03-01 10:00:00",
    "num_scheduled_requests": 2, "num_ctx_requests": 0, "num_ctx_tokens": 0,
    "num_generation_tokens": 2})`` is ``iter = 7, global_rank = 1, rank = 1,
    currank_total_requests = 3/4, elapsed_time = 0.5s, timestamp = 2025-03-01 10:00:00,
    num_scheduled_requests: 2, states = {'num_ctx_requests': 0, 'num_ctx_tokens': 0,
    'num_generation_tokens': 2}``.
    """
    pairs, states = [f"iter = {iteration}"], []
    for f in log_fields.printed(fmt, fields):
        v = str(values.get(f.name, "N/A"))
        text = v if v == "N/A" else v + f.unit
        if f.in_states:
            states.append(f"'{f.name}'{f.sep}{text}")
        else:
            pairs.append(f"{f.name}{f.sep}{text}")
    if states:
        pairs.append("states = {" + ", ".join(states) + "}")
    return ", ".join(pairs)


class LogWriter:
    """Writes ``executor.log`` body by body.

    Args:
        f: a text stream opened for writing.
        ranks: attention-DP ranks of the run.
        overlap: the overlap loop runs (names the loop frame of a traceback).
        log_format: ``V1`` .. ``V5``.
        log_ranks: ``"all"`` or the ranks that print iteration lines.
        launcher: None, ``"srun"`` or ``"mpirun"``.
        prefix_style: one of :data:`PREFIX_STYLES`.
    """

    def __init__(self, f: io.TextIOBase, *, ranks: int, overlap: bool, log_format: str = "V4",
                 log_ranks: str | Iterable[int] = "all", launcher: str | None = None,
                 prefix_style: str = "rank", version: str | None = None):
        fmt = log_format.upper()
        if fmt not in LOG_FORMATS:
            raise ConfigError(f"unknown log format {log_format!r}", hint="formats: " + ", ".join(LOG_FORMATS))
        if launcher not in LAUNCHERS:
            raise ConfigError(f"unknown launcher {launcher!r}", hint="launchers: srun, mpirun")
        if prefix_style not in PREFIX_STYLES:
            raise ConfigError(f"unknown prefix style {prefix_style!r}",
                              hint="styles: " + ", ".join(PREFIX_STYLES))
        self.f = f
        self.R = ranks
        self.fmt = fmt
        lr = parse_log_ranks(log_ranks)
        self.printing = list(range(ranks)) if lr == "all" else [r for r in lr if 0 <= r < ranks]
        self.launcher = launcher
        self.style = prefix_style
        self.loop_name = "_executor_loop_overlap" if overlap else "_executor_loop"
        self._pending: list[tuple[int, str]] = []
        self._stamp_cache: tuple[int, str, str] = (-1, "", "")
        if version:
            self._emit(0, f"[TensorRT-LLM] TensorRT-LLM version: {version}", stream="out")

    # ----------------------------------------------------------------- prefixes
    def _stamps(self, t: float) -> tuple[str, str]:
        sec = int(t)
        if sec != self._stamp_cache[0]:
            g = time.gmtime(sec)
            self._stamp_cache = (sec, time.strftime("%m/%d/%Y-%H:%M:%S", g),
                                 time.strftime("%Y-%m-%d %H:%M:%S", g))
        return self._stamp_cache[1], self._stamp_cache[2]

    def _logger(self, rank: int, sev: str, t: float) -> str:
        stamp = self._stamps(t)[0]
        if self.style == "rank":
            return f"[{stamp}] [TRT-LLM] [RANK {rank}] [{sev}] "
        if self.style == "single":
            return f"[{stamp}] [TRT-LLM] [{sev}] "
        if self.style == "mpi_rank":
            return f"[{stamp}] [TRT-LLM] [MPI_Rank {rank}] [{sev}] "
        return f"[{stamp}] [TRT-LLM] [{sev}] [_torch][RANK {rank}] "

    def _emit(self, rank: int, text: str, stream: str = "out") -> None:
        """Write a (possibly multi-line) message, each physical line wrapped by the launcher."""
        if self.launcher is None:
            self.f.write(text + "\n")
            return
        wrap = f"{rank}: " if self.launcher == "srun" else f"[1,{rank}]<std{stream}>:"
        self.f.write("".join(wrap + line + "\n" for line in text.split("\n")))

    # ----------------------------------------------------------------- lines
    def _iteration_line(self, b: Body, r: int, t_print: float) -> str:
        out = b.out
        cq = bool(out.can_queue[r])
        dummy = bool(out.padded[r] or b.carried[r] or out.postpadded[r])  # in the batch
        ctx_dummy = dummy and bool((out.padded[r] and out.role_context[r]) or
                                   (b.carried[r] and b.carried_context[r]))
        if cq:
            n_ctx = int(b.sched_ctx[r]) + ctx_dummy
            ctx_tok = int(b.sched_ctx_tokens[r]) + ctx_dummy
            gen_tok = int(b.sched_gen[r]) + (dummy and not ctx_dummy)
        else:
            n_ctx = ctx_tok = gen_tok = 0
        kv = f"{int(b.kv_used_blocks[r]) / b.kv_max_blocks:.3f}" if b.kv_max_blocks else "N/A"
        values = {
            "global_rank": r, "rank": r, "num_scheduled_requests": int(out.batch[r]),
            "adp_dummy_ctx_tokens": 1 if (cq and ctx_dummy) else 0,
            "adp_dummy_gen_tokens": 1 if (cq and dummy and not ctx_dummy) else 0,
            "kv_cache_util": kv,
            "currank_total_requests": f"{int(b.fetched_rank_total[r])}/{b.fetched_total}",
            "elapsed_time": repr(b.host_step_ms / 1000.0),
            "host_step_time": round(b.host_step_ms, 6),
            "prev_device_step_time": ("N/A" if b.prev_device_step_ms is None
                                      else round(b.prev_device_step_ms, 6)),
            "timestamp": self._stamps(t_print)[1],
            "num_ctx_requests": n_ctx, "num_ctx_tokens": ctx_tok, "num_generation_tokens": gen_tok,
        }
        return iteration_line(self.fmt, b.iter + 1, values)

    def _traceback(self, frames, exc: str) -> list[str]:
        lines = ["Traceback (most recent call last):"]
        for path, line, func, src in frames:
            lines.append(f'  File "{path}", line {line}, in {func}')
            lines.append(f"    {src}")
        lines.append(exc)
        return lines

    def _crash(self, b: Body, r: int, t: float) -> None:
        kind = int(b.out.crash_kind[r])
        last = _ASSERT_FRAME if kind == CRASH_ASSERT else _ALLOC_FRAME
        exc = "AssertionError" if kind == CRASH_ASSERT else "TypeError: 'NoneType' object is not subscriptable"
        msg = "" if kind == CRASH_ASSERT else "'NoneType' object is not subscriptable"
        loop = (_PKG, 1417, self.loop_name, _LOOP_FRAMES[1][3])
        inner = [_LOOP_FRAMES[0], loop, _LOOP_FRAMES[2], last]
        self._emit(r, self._logger(r, "E", t) + f"Error in event loop: {msg}", stream="err")
        self._emit(r, self._logger(r, "E", t) + "\n".join(self._traceback(inner, exc)), stream="err")
        outer = [(_THREADING, 1075, "_bootstrap_inner", "self.run()"),
                 (_THREADING, 1012, "run", "self._target(*self._args, **self._kwargs)"),
                 (_PKG, 372, "_event_loop_wrapper", "raise e")] + inner
        self._emit(r, "\n".join([f"Exception in thread Thread-{5 + r} (_event_loop_wrapper):"]
                                + self._traceback(outer, exc)), stream="err")

    # ----------------------------------------------------------------- the sink
    def body(self, b: Body) -> None:
        """Print what the top of this body and its pad step print; hold its iteration line."""
        t = b.start_s
        for r, text in self._pending:
            self._emit(r, self._logger(r, "I", t) + text)
        self._pending = []
        out = b.out
        for r in range(self.R):
            if out.surplus[r]:
                self._emit(r, self._logger(r, "W", t) + (
                    f"active_requests ({int(out.active[r])}) exceeds expected_num_active_requests "
                    f"({int(out.expected[r])}); tolerating the surplus (a leaked ADP pad dummy)"))
            if out.alloc_failed[r] and b.precheck_recorded_fail[r]:
                self._emit(r, self._logger(r, "W", t) + (
                    "Unable to fit the complete attention-DP dummy KV allocation; skipping this "
                    "forward iteration and retrying"))
            elif out.alloc_failed[r]:
                self._emit(r, self._logger(r, "W", t) + (
                    "Cannot allocate an ADP pad dummy (add_dummy_requests returned None); "
                    "skipping padding this iteration, the fleet will retry."))
            elif b.precheck_recorded_fail[r]:   # the post-schedule pad's own precheck
                self._emit(r, self._logger(r, "W", t) + (
                    "attention-DP rank scheduled an empty batch and cannot afford even a padding "
                    "dummy; the forward pass is vetoed fleet-wide this iteration"))
        if b.crashed:
            for r in range(self.R):
                if out.crash[r]:
                    self._crash(b, r, t)
            return
        t_next = t + b.host_step_ms / 1000.0
        self._pending = [(r, self._iteration_line(b, r, t_next)) for r in self.printing]

    def close(self) -> None:
        """End of the run: the last body's line would print at the top of a body that never runs."""
        self._pending = []
