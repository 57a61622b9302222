"""Request-state traces (v1, v2) as in-memory records: loaded from any input, sized, written back.

The minimizer and the test exporter work on plain records (the JSON objects of
``traces/FORMAT.md``: one run record, then frame records), because every shrink must stay a valid
trace and records are what a reviewer reads. pandas is imported only inside the loaders.

Example:
    >>> recs = [{"kind": "run", "format": "adp-trace", "version": 1, "tp_size": 2},
    ...         {"kind": "frame", "iter": 7, "rank": 0, "requests": [{"id": 5, "state": 13}]},
    ...         {"kind": "frame", "iter": 7, "rank": 1, "requests": []}]
    >>> TraceSize.of(recs)
    TraceSize(ranks=2, iterations=1, requests=1, frames=2)
"""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any, Iterable, Optional

from forensics.errors import DatasetError, NoTraceError, TraceFormatError
from forensics.output_dir import atomic_path

#: Recorded per-frame fields that are decisions or environment facts, not held requests.
DECISION_FIELDS = ("expected", "padded", "scheduled", "can_queue", "alloc_ok", "postpadded",
                   "kv_precheck_ok")


@dataclasses.dataclass(frozen=True)
class TraceSize:
    """How big a trace is.

    Fields:
        ranks: ``tp_size`` of the run record.
        iterations: distinct frame iterations.
        requests: distinct real requests (``(rank, id)`` pairs).
        frames: frame records.
    """

    ranks: int
    iterations: int
    requests: int
    frames: int

    @classmethod
    def of(cls, records: Iterable[dict]) -> "TraceSize":
        recs = list(records)
        frames = [r for r in recs if r.get("kind") == "frame"]
        run = run_record(recs)
        reqs = {(f["rank"], q["id"]) for f in frames for q in f.get("requests", ())
                if not q.get("dummy", False)}
        return cls(ranks=int(run.get("tp_size", 0)), iterations=len({f["iter"] for f in frames}),
                   requests=len(reqs), frames=len(frames))

    def describe(self) -> str:
        """``2 ranks, 1 iteration, 3 requests, 2 frames``."""
        return ", ".join(f"{n} {word}{'' if n == 1 else 's'}" for n, word in (
            (self.ranks, "rank"), (self.iterations, "iteration"), (self.requests, "request"),
            (self.frames, "frame")))


def run_record(records: list[dict]) -> dict:
    """The run record (the first record); a :class:`TraceFormatError` when it is missing."""
    if not records or records[0].get("kind") != "run":
        raise TraceFormatError("the first record is not a run record (traces/FORMAT.md)",
                               path="<records>", line=1)
    return records[0]


def frame_records(records: list[dict]) -> list[dict]:
    return [r for r in records if r.get("kind") == "frame"]


def records_from_tables(runs, frames, requests, run: Optional[str] = None) -> list[dict]:
    """Trace records of one run from dataset tables (Arrow or pandas, dataset schema).

    The run record is the recorded one, verbatim (``runs.record_json``); frames come in
    ``(iter, rank)`` order with their requests in list order, states as names, and recorded
    decisions only where they were recorded.

    Raises:
        DatasetError: no run, or several runs and ``run`` not given.
    """
    import pandas as pd
    from replay.states import RequestState

    def df(t):
        return t if isinstance(t, pd.DataFrame) else t.to_pandas()

    runs, frames, requests = df(runs), df(frames), df(requests)
    names = list(dict.fromkeys(str(x) for x in runs["run"])) if len(runs) else []
    if not names:
        raise NoTraceError()
    if run is None:
        if len(names) > 1:
            raise DatasetError(f"the input holds {len(names)} runs; choose one",
                               hint="runs: " + ", ".join(names))
        run = names[0]
    if run not in names:
        raise DatasetError(f"no run {run!r}", hint="runs: " + ", ".join(names))
    row = runs[runs["run"] == run].iloc[0]
    out: list[dict] = [json.loads(row["record_json"])]
    frames = frames[frames["run"] == run].sort_values(["iter", "rank"], kind="stable")
    requests = requests[requests["run"] == run].sort_values(["iter", "rank", "pos"], kind="stable")
    by_frame: dict[tuple[int, int], list[dict]] = {}
    for it, rk, rid, st, dm in zip(requests["iter"], requests["rank"], requests["request_id"],
                                   requests["state_value"], requests["dummy"]):
        try:
            state: Any = RequestState(int(st)).name
        except ValueError:
            state = int(st)
        q: dict[str, Any] = {"id": int(rid), "state": state}
        if bool(dm):
            q["dummy"] = True
        by_frame.setdefault((int(it), int(rk)), []).append(q)
    for rec in frames.to_dict("records"):
        key = (int(rec["iter"]), int(rec["rank"]))
        f: dict[str, Any] = {"kind": "frame", "iter": key[0], "rank": key[1],
                             "requests": by_frame.get(key, [])}
        for name in DECISION_FIELDS:
            v = rec.get(name)
            if v is None or v is pd.NA or (isinstance(v, float) and v != v):
                continue
            f[name] = bool(v) if name in ("padded", "can_queue", "alloc_ok", "postpadded",
                                          "kv_precheck_ok") \
                else int(v)
        out.append(f)
    return out


def input_tables(path: str | os.PathLike):
    """``(runs, frames, requests)`` Arrow tables of any input ``forensics ingest`` accepts.

    A single trace file (plain or compressed) is read directly with the trace reader; anything
    else (a directory of per-rank files, logs, a dataset directory) goes through
    ``forensics.readers.dataset_cache.as_dataset``.
    """
    p = Path(path)
    if p.is_file():
        from forensics.readers.kinds import detect_kind
        from forensics.readers.sources import display_name, head_bytes
        if detect_kind(head_bytes(p).decode("utf-8", "replace")) == "trace":
            from forensics.readers.trace_v1 import read_trace
            t = read_trace(p, display_name(p))
            return t.runs, t.frames, t.requests
    from forensics.readers.dataset_cache import as_dataset
    ds = as_dataset([str(p)])
    return ds.arrow("runs"), ds.arrow("frames"), ds.arrow("requests")


def load_records(source: Any, run: Optional[str] = None) -> list[dict]:
    """Trace v1 records of one run from records, a dataset, or any input ``forensics ingest`` accepts.

    Args:
        source: a list of records (returned as a copy), a loaded ``Dataset``, or a path (a trace
            file, plain or compressed, a directory of per-rank files, a dataset directory).
        run: the run to take when the input holds several.
    """
    if isinstance(source, list):
        return [dict(r) for r in source]
    if isinstance(source, (str, os.PathLike)):
        return records_from_tables(*input_tables(source), run=run)
    return records_from_tables(source.arrow("runs"), source.arrow("frames"),
                               source.arrow("requests"), run=run)


def dumps_records(records: Iterable[dict]) -> str:
    """JSON Lines text of records (one compact object per line)."""
    return "".join(json.dumps(r, separators=(", ", ": ")) + "\n" for r in records)


def write_records(records: Iterable[dict], path: str | os.PathLike) -> Path:
    """Write records as a JSON Lines trace (atomically: a temporary file renamed into place)."""
    path = Path(path)
    with atomic_path(path) as tmp:
        tmp.write_text(dumps_records(records), encoding="utf-8")
    return path


def records_from_frames(frames: Any) -> list[dict]:
    """Trace records (the newest format version) that replay exactly like a ``replay.frames.RunFrames``.

    Real requests are written in list order; a recorded dummy is written as one dummy entry at
    the end of its frame (the replay drops dummies and uses only their count, for the recorded
    ``expected`` check); ``scheduled`` is written so that the replay derives the same real batch.
    Iterations the replay skipped (a rank without a frame) are not written, so a request first
    seen in such an iteration is first seen later in the result.
    """
    from forensics.readers.trace_v1 import FORMAT_NAME, FORMAT_VERSION
    from replay.config import DEFAULT_EXPECTED_MULTIPLIER
    from replay.states import RequestState

    cfg = frames.config
    run: dict[str, Any] = {"kind": "run", "format": FORMAT_NAME, "version": FORMAT_VERSION,
                           "tp_size": cfg.tp_size, "pp_size": cfg.pp_size,
                           "max_batch_size": cfg.max_batch_size,
                           "max_num_active_requests": cfg.cap, "disaggregated": cfg.disaggregated,
                           "overlap_scheduler": cfg.overlap_scheduler, "build": cfg.build}
    if cfg.model_arch is not None:
        run["model_arch"] = cfg.model_arch
    if cfg.encoder_decoder:
        run["encoder_decoder"] = True
    if not cfg.enable_attention_dp:
        run["enable_attention_dp"] = False
    if cfg.expected_multiplier != DEFAULT_EXPECTED_MULTIPLIER:
        run["expected_multiplier"] = cfg.expected_multiplier
    run["run_id"] = frames.run
    out = [run]
    for i, it in enumerate(frames.iters.tolist()):
        for r in range(frames.num_ranks):
            reqs: list[dict[str, Any]] = []
            for rid, st in frames.requests_of(i, r):
                try:
                    state: Any = RequestState(st).name
                except ValueError:
                    state = st
                reqs.append({"id": rid, "state": state})
            n_dummies = int(frames.recorded_dummies[i, r])
            reqs += [{"id": 0, "state": "GENERATION_IN_PROGRESS", "dummy": True}] * n_dummies
            f: dict[str, Any] = {"kind": "frame", "iter": int(it), "rank": r, "requests": reqs}
            if frames.expected_recorded[i, r] >= 0:
                f["expected"] = int(frames.expected_recorded[i, r])
            padded = int(frames.rec_padded[i, r])
            if padded >= 0:
                f["padded"] = bool(padded)
            post = int(frames.rec_postpadded[i, r])
            if post >= 0:
                f["postpadded"] = bool(post)
            if frames.real_batch[i, r] >= 0:
                had_dummy = padded == 1 or n_dummies > 0
                f["scheduled"] = int(frames.real_batch[i, r]) + int(had_dummy) + int(post == 1)
            if frames.rec_can_queue[i, r] >= 0:
                f["can_queue"] = bool(frames.rec_can_queue[i, r])
            if not frames.alloc_ok[i, r]:
                f["alloc_ok"] = False
            if not frames.kv_precheck_ok[i, r]:
                f["kv_precheck_ok"] = False
            out.append(f)
    return out


__all__ = ["DECISION_FIELDS", "TraceSize", "run_record", "frame_records", "records_from_tables",
           "input_tables", "load_records", "records_from_frames", "dumps_records", "write_records"]
