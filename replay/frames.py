"""One run's frames as dense ``(iterations, ranks)`` arrays, precomputed once for every policy.

A frame is what a rank held at pad entry (traces/FORMAT.md). The replay only needs per-frame
counts, so the requests table is reduced with ``bincount`` to arrays of shape ``(I, R)``:
real requests, requests in the scheduler window, requests first seen this iteration, and so on.
Recorded dummies are dropped here (each policy carries its own, see ``replay.walk``).

Iterations where some rank has no frame cannot be replayed (the all-gather needs every rank);
they are dropped and listed in ``dropped_iters``.

Example:
    >>> rf = RunFrames.from_records([                              # doctest: +SKIP
    ...     {"kind": "run", "format": "adp-trace", "version": 1, "tp_size": 2, ...},
    ...     {"kind": "frame", "iter": 0, "rank": 0, "requests": []}, ...])
    >>> rf.n_real.shape                                            # doctest: +SKIP
    (1, 2)
"""
from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from replay.config import RunConfig
from replay.errors import ConfigError, DatasetError, NoTraceError
from replay.first_seen import SeenBefore
from replay.frame_build import build_requests
from replay.frame_counts import counts
from replay.frame_schema import FRAMES
from replay.policy import Policy, Predicate
from replay.request_columns import column_array, read_real_requests, real_requests
from replay.request_grids import frame_order, request_grids
from replay.states import (
    ALL_STATES,
    CONTEXT_INTENT_STATES,
    CONTEXT_ONLY_STATES,
    GENERATION_ONLY_STATES,
    RequestState,
    micro_batch_window,
    state_index,
)
from replay.step import (
    INTENT_CONTEXT,
    INTENT_GENERATION,
    INTENT_NONE,
    StepInputs,
    expected_step,
)

log = logging.getLogger(__name__)

_CONFIG_KEYS = ("expected_multiplier", "enable_attention_dp", "model_arch", "dkv_enabled")


def _as_arrow(t, schema: pa.Schema | None = None) -> pa.Table:
    """An Arrow table; a DataFrame holding every required column of ``schema`` is typed by it
    (an all-null column of a hand-built frame has no type of its own)."""
    if isinstance(t, pa.Table):
        return t
    if isinstance(t, pd.DataFrame):
        if schema is not None:
            missing = [f for f in schema if f.name not in t.columns]
            if all(f.nullable for f in missing):
                # Optional columns a caller's frame predates (``kv_precheck_ok``) read as null.
                t = t.assign(**{f.name: None for f in missing}) if missing else t
                return pa.Table.from_pandas(t[schema.names], schema=schema, preserve_index=False)
        return pa.Table.from_pandas(t, preserve_index=False)
    raise TypeError(f"expected a pyarrow Table or pandas DataFrame, got {type(t).__name__}")


@dataclasses.dataclass(frozen=True, eq=False)
class RunFrames:
    """One run's frames on an ``(I, R)`` grid of (kept iteration, rank).

    Fields:
        run: the run key.
        source: the file the run record came from.
        config: the run configuration from the run record.
        iters: ``(I,)`` executor iteration of each row (sorted, every rank has a frame).
        dropped_iters: iterations dropped because some rank had no frame.
        n_real: real requests per frame.
        window_real: real requests in the micro-batch window.
        new_real: real requests first seen on the rank at this iteration.
        all_before_ctx: the frame has real requests, all in states < CONTEXT_INIT.
        max_first_seen: the latest first-seen iteration among the frame's requests (-1 if none).
        alloc_ok: recorded ``alloc_ok`` (absent: True).
        kv_precheck_ok: recorded ``kv_precheck_ok`` (absent: True).
        real_batch: recorded real batch or -1: ``scheduled`` minus a recorded pad-step or carried
            dummy minus a recorded post-schedule dummy (``postpadded``) where that is recorded,
            else the same without ``postpadded`` limited to ``window_real`` (see ``_real_batch``).
        expected_recorded: recorded ``expected`` or -1.
        recorded_counts: recorded ``len(active_requests)`` (dummies included).
        recorded_dummies: recorded dummies in the frame.
        rec_padded, rec_can_queue: recorded decisions, -1 absent, else 0/1.
        rec_postpadded: recorded ``postpadded`` (PR #17379 post-schedule dummy), -1 absent,
            else 0/1.
        rec_scheduled: recorded ``scheduled`` or -1.
        line: the frame's line in its source.
        req_frame: ``(N,)`` flat frame index ``i * R + r`` of each real request, sorted (int32
            unless the grid has 2**31 frames or more).
        req_id, req_state, req_pos: the real requests, in frame then list order.
        req_first: the iteration each of them was first seen on its rank (int32 when the
            iterations fit).
        req_offsets: ``(I * R + 1,)`` start of each frame's requests in the ``req_*`` arrays.
        intent: ``(I, R)`` forward intent of each frame (``replay.step.INTENT_*``) from its real
            requests: what upstream's non-overlap code all-reduces (PR #16921).
        ctx_arrived, gen_arrived: ``(I,)`` a context-only / generation-only request was routed
            to some rank this iteration. Traces carry no request type: on a disaggregated run a
            request first seen in a context-server state (CONTEXT_INIT, DISAGG_CONTEXT_*) is
            taken as context-only, one first seen in a DISAGG_GENERATION_* state as
            generation-only (assumption, stated in reports through the ledger role).
    """

    run: str
    source: str
    config: RunConfig
    iters: np.ndarray
    dropped_iters: tuple[int, ...]
    n_real: np.ndarray
    window_real: np.ndarray
    new_real: np.ndarray
    all_before_ctx: np.ndarray
    max_first_seen: np.ndarray
    alloc_ok: np.ndarray
    kv_precheck_ok: np.ndarray
    real_batch: np.ndarray
    expected_recorded: np.ndarray
    recorded_counts: np.ndarray
    recorded_dummies: np.ndarray
    rec_padded: np.ndarray
    rec_scheduled: np.ndarray
    rec_can_queue: np.ndarray
    rec_postpadded: np.ndarray
    line: np.ndarray
    req_frame: np.ndarray
    req_id: np.ndarray
    req_state: np.ndarray
    req_pos: np.ndarray
    req_first: np.ndarray
    req_offsets: np.ndarray
    _sched_cache: dict = dataclasses.field(default_factory=dict, repr=False)
    #: :meth:`base_expected` by (configuration, cap, recorded ``expected`` applies).
    _expected_cache: dict = dataclasses.field(default_factory=dict, repr=False)
    #: Inputs :meth:`inputs` shares between policies (``_shared_input``).
    _inputs_cache: dict = dataclasses.field(default_factory=dict, repr=False)
    intent: np.ndarray = None  # type: ignore[assignment]
    ctx_arrived: np.ndarray = None  # type: ignore[assignment]
    gen_arrived: np.ndarray = None  # type: ignore[assignment]
    #: A window of a run (``replay.frame_windows.FrameWindows``): the dummy role carried in from the rows
    #: before it (the last arrival before the window was context-only).
    role_before: bool = False
    #: ``(N,)`` each real request's ``replay.states.state_index`` (int8): the predicates'
    #: counts select rows by it (computed once per run or window, not once per count).
    req_state_index: np.ndarray = dataclasses.field(default=None, repr=False)  # type: ignore[assignment]

    def __repr__(self) -> str:
        """What, how big, and the configuration; not the arrays (tens of thousands of characters)."""
        c = self.config
        span = f"iters {int(self.iters[0])}..{int(self.iters[-1])}" if self.iters.size else "no iters"
        drop = f", {len(self.dropped_iters)} dropped" if self.dropped_iters else ""
        return (f"<RunFrames {self.run!r}: {self.num_iters} iterations x {self.num_ranks} ranks "
                f"({span}{drop}), {int(self.req_id.size)} request rows; tp {c.tp_size}, "
                f"pp {c.pp_size}, cap {c.cap}, {'disaggregated' if c.disaggregated else 'aggregated'}"
                + (f", build {c.build!r}" if c.build else "") + ">")

    @property
    def num_iters(self) -> int:
        return int(self.iters.size)

    @property
    def num_ranks(self) -> int:
        return int(self.config.tp_size)

    # ----------------------------------------------------------------- construction
    @classmethod
    def from_records(cls, records: Iterable[dict], source: str = "<records>") -> RunFrames:
        """From in-memory trace records (one run record first), read by the installed trace
        reader (``replay.feed``: the forensics pipeline's)."""
        from replay.feed import readers
        t = readers().tables_from_records(records, source)
        return cls.from_tables(t.runs, t.frames, t.requests)

    @classmethod
    def from_dataset(cls, ds: Any, run: str | None = None) -> RunFrames:
        """From a loaded dataset (``forensics.load``); ``run`` is needed when it holds several.

        Reads only the columns the replay needs, and the requests row group by row group into
        compact arrays of the real requests (about 25 bytes a request instead of a whole table;
        figures in benchmarks/trace_ingest.py).
        """
        files_of = getattr(ds, "files", None)
        run, source, config, several = run_config(ds.arrow("runs"), run)
        frame_files = files_of("frames", run=run) if files_of else []
        request_files = files_of("requests", run=run) if files_of else []
        if len(frame_files) != 1 or len(request_files) != 1:
            return cls.from_tables(ds.arrow("runs"), ds.arrow("frames"), ds.arrow("requests"), run=run)
        # Layout 2.0 has one file per run; a 1.x dataset's single file is filtered by run.
        only = run if several and len(files_of("frames")) == 1 else None
        frames = pq.read_table(frame_files[0], schema=FRAMES,
                               columns=[c for c in FRAMES.names if c not in ("run", "source")],
                               filters=[("run", "==", run)] if only else None)
        return cls.from_parts(run, source, config, frames, read_real_requests(request_files[0], only))

    @classmethod
    def from_tables(cls, runs, frames, requests, run: str | None = None) -> RunFrames:
        """From ``runs``, ``frames`` and ``requests`` tables (Arrow or pandas, dataset schema)."""
        runs, frames, requests = _as_arrow(runs), _as_arrow(frames, FRAMES), _as_arrow(requests)
        run, source, config, several = run_config(runs, run)
        if several:  # a single-run input needs no (costly) string filter
            frames = frames.filter(pc.equal(frames.column("run"), run))
            requests = requests.filter(pc.equal(requests.column("run"), run))
        return cls.from_parts(run, source, config, frames, real_requests(requests))

    @classmethod
    def from_parts(cls, run: str, source: str, config: RunConfig, frames: pa.Table,
               requests: tuple[np.ndarray, ...], *, first_iter: int | None = None,
               seen: SeenBefore | None = None) -> RunFrames:
        """``requests``: :func:`real_requests` of the run (real requests only, compact).

        A window of a run (``replay.frame_windows.FrameWindows``) passes the run's ``first_iter`` and the
        first-seen iterations of the windows before it (``seen``, updated here).
        """
        R = config.tp_size
        f_iter = column_array(frames.column("iter"), np.int64)
        f_rank = column_array(frames.column("rank"), np.int64)
        if f_rank.size and (f_rank.min() < 0 or f_rank.max() >= R):
            raise DatasetError(f"run {run!r}: a frame rank is outside [0, {R})", path=source)
        all_iters, per_iter = iteration_runs(f_iter)
        kept = all_iters[per_iter == R]
        skipped = tuple(int(x) for x in all_iters[per_iter != R])
        if skipped:
            log.info("run %s: %d iterations lack a frame on some rank and are not replayed",
                     run, len(skipped))
        I = kept.size
        pos = np.searchsorted(kept, f_iter)
        pos_c = np.minimum(pos, max(I - 1, 0))
        ok = (I > 0) & (kept[pos_c] == f_iter) if I else np.zeros(f_iter.size, bool)
        flat = pos_c[ok] * R + f_rank[ok]
        # Frames written iteration by iteration, rank by rank, none dropped (the usual trace):
        # each column is its grid already, no scatter (12 columns a window, measured ~2 ms).
        in_grid = flat.size == f_iter.size == I * R and bool((flat == np.arange(I * R)).all())

        def grid(values: np.ndarray, fill, dtype) -> np.ndarray:
            if in_grid:
                return values.astype(dtype).reshape(I, R)
            g = np.full(I * R, fill, dtype=dtype)
            g[flat] = values[ok]
            return g.reshape(I, R)

        def col(name, fill, dtype):
            return column_array(frames.column(name), dtype, fill)

        num_req = col("num_requests", 0, np.int64)
        num_dummy = col("num_dummies", 0, np.int64)
        rec_padded = _bool_code(frames, "padded")
        rec_cq = _bool_code(frames, "can_queue")
        rec_sched = col("scheduled", -1, np.int64)
        alloc = _bool_code(frames, "alloc_ok") != 0
        precheck = _bool_code(frames, "kv_precheck_ok") != 0 if "kv_precheck_ok" in \
            frames.column_names else np.ones(frames.num_rows, bool)
        had_dummy = (rec_padded == 1) | (num_dummy > 0)
        real_batch = np.where(rec_sched >= 0, np.maximum(rec_sched - had_dummy, 0), -1)
        rec_post = _bool_code(frames, "postpadded") if "postpadded" in frames.column_names \
            else np.full(frames.num_rows, -1, np.int8)
        # Recorded postpadded: the real batch is exact (scheduled - postpadded - pad dummy).
        exact_batch = np.where((rec_sched >= 0) & (rec_post >= 0),
                               np.maximum(real_batch - (rec_post == 1), 0), -1)

        # Requests: real ones only, on the grid (compiled in one pass when the kernel is there).
        if first_iter is None:
            first_iter = int(f_iter.min()) if f_iter.size else 0
        sched_mask = Predicate.SCHEDULER.mask(config)
        every = np.ones(1, bool)
        selections = [
            (every, False), (micro_batch_window(config.encoder_decoder).mask(), False),
            (every, True), (_BEFORE_CONTEXT, False), (sched_mask, False),
            (Predicate.NOT_AWAITING_KV.mask(config), False),
            (np.r_[sched_mask, False] & _CONTEXT_INTENT, False),   # -1: False, as with np.isin
            (_CONTEXT_ONLY, True), (_GENERATION_ONLY, True)]
        built = build_requests(requests, kept, R, first_iter, seen, selections, _BEFORE_SELECTION,
                               int(RequestState.CONTEXT_INIT), _STATE_INDEX_TABLE)
        if built is None:
            built = request_grids(requests, kept, R, first_iter, seen, selections,
                                  _BEFORE_SELECTION)
        r_flat, r_id, r_state, r_pos, first, sidx, grids, mfs, ordered = built
        if not ordered:   # in frame order, as the numpy path sorts them (usually they are)
            order = frame_order(r_flat, r_pos)
            r_flat, r_id, r_state, r_pos, first, sidx = (
                a[order] for a in (r_flat, r_id, r_state, r_pos, first, sidx))
            del order
        n = I * R
        (n_real, window_real, new_real, before, n_sched, n_not_waiting, n_ctx, ctx_new,
         gen_new) = grids
        intent = np.where(n_ctx > 0, INTENT_CONTEXT,
                          np.where(n_sched > 0, INTENT_GENERATION, INTENT_NONE)).astype(np.int8)
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(n_real, out=offsets[1:])
        shape = (I, R)
        # sched_real of every predicate, from the counts above (the mask of Predicate.WINDOW is
        # the micro-batch window's, of ALL every state): no further pass over the requests
        sched = {Predicate.ALL: n_real, Predicate.WINDOW: window_real,
                 Predicate.SCHEDULER: n_sched, Predicate.NOT_AWAITING_KV: n_not_waiting}
        cache = {p: (n_real if p.mask(config).all() else c).reshape(shape)
                 for p, c in sched.items()}
        return cls(
            run=run, source=source, config=config, iters=kept, dropped_iters=skipped,
            n_real=n_real.reshape(shape), window_real=window_real.reshape(shape),
            new_real=new_real.reshape(shape),
            all_before_ctx=((n_real > 0) & (before == n_real)).reshape(shape),
            max_first_seen=mfs.reshape(shape), alloc_ok=grid(alloc, True, bool),
            kv_precheck_ok=grid(precheck, True, bool),
            real_batch=_real_batch(grid(real_batch, -1, np.int64), window_real.reshape(shape),
                                   grid(exact_batch, -1, np.int64)),
            expected_recorded=grid(col("expected", -1, np.int64), -1, np.int64),
            recorded_counts=grid(num_req, 0, np.int64), recorded_dummies=grid(num_dummy, 0, np.int64),
            rec_padded=grid(rec_padded, -1, np.int8), rec_scheduled=grid(rec_sched, -1, np.int64),
            rec_can_queue=grid(rec_cq, -1, np.int8), rec_postpadded=grid(rec_post, -1, np.int8),
            line=grid(col("line", -1, np.int64), -1, np.int64),
            req_frame=r_flat, req_id=r_id, req_state=r_state.astype(np.int16, copy=False),
            req_pos=r_pos, req_first=first, req_offsets=offsets, intent=intent.reshape(shape),
            req_state_index=sidx, _sched_cache=cache,
            ctx_arrived=(ctx_new.reshape(shape) > 0).any(axis=1) & config.disaggregated,
            gen_arrived=(gen_new.reshape(shape) > 0).any(axis=1) & config.disaggregated)

    # ----------------------------------------------------------------- derived inputs
    def sched_real(self, predicate: Predicate) -> np.ndarray:
        """``(I, R)`` real requests the predicate counts (cached per predicate)."""
        key = predicate
        if key not in self._sched_cache:
            mask = predicate.mask(self.config)
            if mask.all():
                out = self.n_real
            else:
                sidx = self.req_state_index
                if sidx is None:
                    sidx = state_index(self.req_state)
                out = counts(self.req_frame, self.n_real.size,
                              lambda a, b: mask[sidx[a:b]]).reshape(self.n_real.shape)
            self._sched_cache[key] = out
        return self._sched_cache[key]

    def inputs(self, policy: Policy, config: RunConfig | None = None) -> StepInputs:
        """``(I, R)`` step inputs for a policy, with no carried dummies."""
        cfg = config or self.config
        z = np.zeros(self.n_real.shape, bool)
        exp_rec = self.expected_recorded
        if not self.recorded_expected_applies(policy):
            exp_rec = self._shared_input("no recorded expected", lambda: np.full(
                self.n_real.shape, -1, np.int64))
        role = self._shared_input(("role", policy.dummy_role), lambda: np.broadcast_to(
            self.dummy_role_context(policy)[:, None], self.n_real.shape))
        return StepInputs(n_real=self.n_real, sched_real=self.sched_real(policy.predicate(cfg)),
                          window_real=self.window_real, new_real=self.new_real,
                          all_before_ctx=self.all_before_ctx, alloc_ok=self.alloc_ok,
                          real_batch=self.real_batch, expected_recorded=exp_rec,
                          recorded_counts=self.recorded_counts, carried=z, carried_last=z,
                          intent=self.intent,
                          role_context=role,
                          kv_precheck_ok=self.kv_precheck_ok)

    def decision_rows(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``(iter, rank)`` of each decision of the first ``n`` rows, flat in row order: the
        same for every policy's decisions of these frames, so made once (read-only; on
        fleet-1h, 15 walks a window)."""
        R = self.num_ranks
        return (self._shared_input(("decision iter", n), lambda: np.repeat(self.iters[:n], R)),
                self._shared_input(("decision rank", n),
                                   lambda: np.tile(np.arange(R, dtype=np.int64), n)))

    def _shared_input(self, key, make) -> np.ndarray:
        """An input array that policies share (read-only), made once per frames: the policies
        of a window's walks read the same role rows and the same absent recorded ``expected``
        (on fleet-1h, 15 walks a window)."""
        got = self._inputs_cache.get(key)
        if got is None:
            got = make()
            got.setflags(write=False)
            self._inputs_cache[key] = got
        return got

    def base_expected(self, policy: Policy, config: RunConfig,
                      inputs: StepInputs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``replay.step.expected_step`` of ``inputs``, this window's :meth:`inputs` of the
        policy (no carried dummy): it reads of the policy only its cap and whether the recorded
        ``expected`` applies, so the policies alike in both share one (cached, read-only; on
        fleet-1h 15 walks of each window, 3 distinct)."""
        key = (config, bool(policy.cap), self.recorded_expected_applies(policy))
        got = self._expected_cache.get(key)
        if got is None:
            got = expected_step(policy, config, inputs)
            for a in got:
                a.setflags(write=False)
            self._expected_cache[key] = got
        return got

    def dummy_role_context(self, policy: Policy) -> np.ndarray:
        """``(I,)`` whether the version's pad dummy takes the context role at each row, outside
        the forward-intent path (``Policy.dummy_role``; domain doc §10)."""
        return policy.dummy_role.context_rows(self.ctx_arrived, self.gen_arrived,
                                              previous=self.role_before)

    def recorded_expected_applies(self, policy: Policy) -> bool:
        """Whether the recorded ``expected`` may stand in for the policy's own.

        Only when the recording build's rule (capped or not, §5) is the policy's: a capped
        recording says nothing about an uncapped build's floor, where a leaked dummy raises
        ``expected`` (no assert can trip), and vice versa. The recording's rule is known when its
        ``build`` is a catalogue name; otherwise it is assumed capped (every build since PR
        #13347), so an uncapped policy never reuses a value of unknown origin.
        """
        from replay.catalogue import CATALOGUE
        rec = CATALOGUE.get(self.config.build)
        rule = rec.expected_rule if rec is not None else "capped"
        return rule == policy.expected_rule

    def requests_of(self, i: int, r: int) -> list[tuple[int, int]]:
        """``[(request_id, state_value), ...]`` of the real requests of row ``i``, rank ``r``."""
        k = i * self.num_ranks + r
        a, b = self.req_offsets[k], self.req_offsets[k + 1]
        return [(int(x), int(s)) for x, s in zip(self.req_id[a:b], self.req_state[a:b])]

    def request_positions(self, i: int, r: int) -> list[int]:
        k = i * self.num_ranks + r
        return [int(p) for p in self.req_pos[self.req_offsets[k]:self.req_offsets[k + 1]]]

    def state_counts(self, i: int, r: int) -> dict[str, int]:
        """Real requests per state name in one frame (for explanations)."""
        out: dict[str, int] = {}
        for _, s in self.requests_of(i, r):
            name = RequestState(s).name
            out[name] = out.get(name, 0) + 1
        return out


def run_config(runs: pa.Table, run: str | None) -> tuple[str, str, RunConfig, bool]:
    """The chosen run's key, source and configuration, and whether the input holds several runs."""
    names = [str(x) for x in runs.column("run").to_pylist()] if runs.num_rows else []
    if not names:
        raise NoTraceError()
    if run is None:
        uniq = list(dict.fromkeys(names))
        if len(uniq) > 1:
            raise ConfigError(f"the input holds {len(uniq)} runs; choose one",
                              hint="runs: " + ", ".join(uniq))
        run = uniq[0]
    if run not in names:
        raise ConfigError(f"no run {run!r}", hint="runs: " + ", ".join(dict.fromkeys(names)))
    row = names.index(run)
    rec = runs.slice(row, 1).to_pylist()[0]
    extra: dict[str, Any] = {}
    try:
        full = json.loads(rec["record_json"])
        extra = {k: full[k] for k in _CONFIG_KEYS if isinstance(full, dict) and k in full}
    except (ValueError, TypeError):
        pass
    config = RunConfig(tp_size=int(rec["tp_size"]), pp_size=int(rec["pp_size"]),
                       max_batch_size=int(rec["max_batch_size"]),
                       max_num_active_requests=int(rec["max_num_active_requests"]),
                       disaggregated=bool(rec["disaggregated"]),
                       overlap_scheduler=bool(rec["overlap_scheduler"]),
                       encoder_decoder=bool(rec["encoder_decoder"]),
                       build=rec.get("build") or "", **extra)
    return run, str(rec["source"]), config, len(set(names)) > 1


def _state_lut(states) -> np.ndarray:
    """Membership of each histogram column (``ALL_STATES`` order) in ``states``, then False:
    indexed by ``state_index``, whose -1 (an unknown state) lands on that last False, as
    ``np.isin`` of the state values gives."""
    return np.r_[np.isin([int(s) for s in ALL_STATES], [int(s) for s in states]), False]


_CONTEXT_INTENT = _state_lut(CONTEXT_INTENT_STATES)
#: States before CONTEXT_INIT (an unknown state's row is counted from its value instead).
_BEFORE_CONTEXT = np.r_[[int(s) < int(RequestState.CONTEXT_INIT) for s in ALL_STATES], False]
_CONTEXT_ONLY = _state_lut(CONTEXT_ONLY_STATES)
_GENERATION_ONLY = _state_lut(GENERATION_ONLY_STATES)
#: Where the count of rows before CONTEXT_INIT is among ``from_parts``' selections.
_BEFORE_SELECTION = 3
#: ``state_index`` of every int16 code, at the code + 2**15 (the compiled builder's table).
_STATE_INDEX_TABLE = state_index(np.arange(-(1 << 15), 1 << 15, dtype=np.int16))


def iteration_runs(it: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(it, return_counts=True)``; without a sort when ``it`` is in order (a trace
    is written iteration by iteration: 0.27 s CPU of sorting on fleet-1h 32x100k)."""
    if not (it[1:] >= it[:-1]).all():
        return np.unique(it, return_counts=True)
    starts = np.flatnonzero(np.r_[True, it[1:] != it[:-1]]) if it.size else np.zeros(0, np.int64)
    return it[starts], np.diff(np.r_[starts, it.size])


def _real_batch(recorded: np.ndarray, window_real: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """Recorded real batch: ``exact`` where the frame records ``postpadded``, else inferred.

    Without ``postpadded`` the recorded batch is limited to the real requests in the window: the
    scheduler takes only window requests, so a recorded ``scheduled`` above them (after removing
    a recorded pad or carried dummy) held a dummy the frame does not show, a post-schedule dummy
    (PR #17379), which ``padded`` (the pad step) does not cover. That inference misses a post-pad
    dummy on a rank whose window requests the capacity scheduler refused (it reads the dummy as a
    real request); a recorded ``postpadded`` removes the guess (traces/FORMAT.md).
    """
    inferred = np.where(recorded >= 0, np.minimum(recorded, window_real), -1)
    return np.where(exact >= 0, exact, inferred)


def _bool_code(frames: pa.Table, name: str) -> np.ndarray:
    """-1 null, 0 false, 1 true."""
    if not frames.num_rows:
        return np.zeros(0, np.int8)
    c = frames.column(name)
    # A column a trace does not record is all null, one every frame records has none (a
    # fleet hour: 3 and 2 of the 5): neither needs the null mask unpacked (~1 ms a window).
    if c.null_count == len(c):
        return np.full(len(c), -1, np.int8)
    vals = column_array(c, np.int8, False)
    if not c.null_count:
        return vals
    nulls = column_array(c.is_null(), bool)
    return np.where(nulls, -1, vals).astype(np.int8)


__all__ = ["RunFrames", "iteration_runs", "run_config"]
