"""What a dataset holds, on one screen: ranks, iteration ranges, rows, events, formats, runs,
frames per traceback and the collector formats the logs came wrapped in.

:func:`summarize` reads only the columns it needs (a dataset from a 1 GB log stays cheap to
summarise); ``to_dict`` gives it for ``--json``, ``forensics.report.summary.render_text`` for a
terminal.
"""
from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from forensics.dataset.schema import META_FILE, REFERENCE_TABLES, TABLES
from forensics.dataset.tables import ArrowDataset

#: Tables whose ``iter`` ranges are reported; their ``iter`` means differ (the log's is one more
#: than the stats/frames ``iter`` of the same loop body), so they are never merged.
ITER_TABLES = ("iterations", "stats", "frames")
#: Tables whose ``rank`` column contributes to the ranks seen.
RANK_TABLES = ("iterations", "events", "stats", "frames")


@dataclass(frozen=True)
class RunSummary:
    """One request-state trace run.

    Attributes:
        run: the run key (``run_id``, else the trace file).
        build: the run record's build label.
        tp_size: attention-DP ranks declared by the run record.
        frames: frame rows of the run.
        ranks: distinct ranks that have frames.
        iter_min: first frame ``iter`` (None without frames).
        iter_max: last frame ``iter``.
    """

    run: str
    build: str | None
    tp_size: int
    frames: int
    ranks: int
    iter_min: int | None
    iter_max: int | None


@dataclass(frozen=True)
class DatasetSummary:
    """The one-screen summary of a dataset.

    Attributes:
        path: the dataset directory.
        schema_version: from ``_meta.json``.
        tool_version: the version of the tool that wrote it.
        inputs: (name, kind, size in bytes) per ingested input.
        refused: "name: reason" per input not ingested.
        rows: rows per table, every table listed.
        ranks: distinct non-null ranks in iterations, events, stats and frames, ascending.
        iter_ranges: table -> (min iter, max iter) for iterations, stats and frames with rows.
        events_by_kind: event kind -> rows, most frequent first (ties by name).
        formats: iteration line format (V1..V5) -> rows, by format name.
        runs: one entry per trace run, by run key.
        frames_per_traceback: frames kept -> traceback events with that many (table
            ``traceback_frames``), by frame count.
        collector_formats: log wrapper (``kubectl``, ``docker``, ``tab``, ``journald``,
            ``srun``, ``mpirun``, ``pdsh``) -> iteration and event rows it wrapped, by name.
    """

    path: str
    schema_version: str
    tool_version: str | None
    inputs: tuple[tuple[str, str, int], ...]
    refused: tuple[str, ...]
    rows: Mapping[str, int]
    ranks: tuple[int, ...]
    iter_ranges: Mapping[str, tuple[int, int]]
    events_by_kind: Mapping[str, int]
    formats: Mapping[str, int]
    runs: tuple[RunSummary, ...] = field(default=())
    frames_per_traceback: Mapping[int, int] = field(default_factory=dict)
    collector_formats: Mapping[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``--json``)."""
        d = asdict(self)
        d["inputs"] = [{"name": n, "kind": k, "size": s} for n, k, s in self.inputs]
        d["iter_ranges"] = {t: list(r) for t, r in self.iter_ranges.items()}
        d["rows"] = dict(self.rows)
        d["events_by_kind"] = dict(self.events_by_kind)
        d["formats"] = dict(self.formats)
        d["ranks"] = list(self.ranks)
        d["refused"] = list(self.refused)
        d["runs"] = [asdict(r) for r in self.runs]
        d["frames_per_traceback"] = {str(k): v for k, v in self.frames_per_traceback.items()}
        d["collector_formats"] = dict(self.collector_formats)
        return d


def _rows(ds: ArrowDataset, table: str) -> int:
    return ds.num_rows(table)


def _counts(ds: ArrowDataset, table: str, column: str) -> dict[str, int]:
    """Non-null values of a string column -> rows, most frequent first (ties by value).

    Read as dictionary arrays and counted by index: the strings of a 1.5 M-row column are never
    built (the ingest's summary of a 500 MB log: 0.05 s less CPU, measured)."""
    counts: Counter[str] = Counter()
    for f in ds.files(table):
        pf = pq.ParquetFile(f, read_dictionary=[column])
        if column not in pf.schema_arrow.names:    # a file of a layout before the column: nulls
            continue
        data = pf.read(columns=[column]).column(0)
        for chunk in data.chunks:
            if isinstance(chunk, pa.DictionaryArray):
                names = chunk.dictionary.to_pylist()
                pairs = pc.value_counts(chunk.indices.drop_null()).to_pylist()
                counts.update({str(names[v["values"]]): int(v["counts"]) for v in pairs})
            else:
                counts.update({str(v["values"]): int(v["counts"])
                               for v in pc.value_counts(chunk.drop_null()).to_pylist()})
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def summarize(dataset: ArrowDataset | str | os.PathLike) -> DatasetSummary:
    """Summarise a dataset, loaded or by path (reads only the columns it needs).

    Raises:
        DatasetError: ``dataset`` is a path that is not a dataset.

    Example:
        >>> print(render_text(summarize(forensics.load("crash.ds"))))   # doctest: +SKIP
    """
    ds = dataset if isinstance(dataset, ArrowDataset) else ArrowDataset(dataset)
    key = _written(ds)
    if key is not None and _LAST.get("key") == key:
        return _LAST["summary"]
    summary = _summarize(ds)
    _LAST.update(key=key, summary=summary)
    return summary


#: The last summary made, with :func:`_written` of its dataset: the ingest summarises the
#: dataset it wrote, and the post-mortem asks again for the same one (~15 ms each, measured).
_LAST: dict[str, Any] = {}


def _written(ds: ArrowDataset) -> tuple | None:
    """Which write of ``ds`` this is: a dataset is written whole and moved into place
    (``forensics.dataset.writer``), so a rewrite has a new ``_meta.json`` (inode and time; its
    content, which names every input's digest and every table's files and rows, in case the
    file system reuses both)."""
    try:
        st = (ds.path / META_FILE).stat()
        meta = json.dumps(ds.meta, sort_keys=True, default=str)
    except (OSError, TypeError, ValueError):
        return None
    return (str(ds.path.resolve()), st.st_dev, st.st_ino, st.st_mtime_ns, meta)


def _summarize(ds: ArrowDataset) -> DatasetSummary:
    meta = ds.meta
    rows = {t: _rows(ds, t) for t in TABLES if t not in REFERENCE_TABLES}

    # Batch by batch: the requests table of a fleet hour is tens of millions of rows.
    ranks: set[int] = set()
    for t in RANK_TABLES:
        if rows[t]:
            for b in ds.batches(t, ["rank"]):
                ranks.update(int(r) for r in pc.unique(b.column(0).drop_null()).to_pylist())
    iter_ranges: dict[str, tuple[int, int]] = {}
    for t in ITER_TABLES:
        if rows[t]:
            los, his = [], []
            for b in ds.batches(t, ["iter"]):
                mm = pc.min_max(b.column(0))
                if mm["min"].as_py() is not None:
                    los.append(mm["min"].as_py())
                    his.append(mm["max"].as_py())
            if los:
                iter_ranges[t] = (int(min(los)), int(max(his)))
    events_by_kind = _counts(ds, "events", "kind") if rows["events"] else {}
    formats = dict(sorted(_counts(ds, "iterations", "format").items())) if rows["iterations"] else {}

    runs: list[RunSummary] = []
    if rows["runs"]:
        run_rows = ds.arrow("runs", columns=["run", "build", "tp_size"]).to_pylist()
        # Per run: frames, ranks, iteration range, gathered batch by batch.
        per: dict[str, list] = {}
        for b in ds.batches("frames", ["run", "iter", "rank"]):
            g = pa.Table.from_batches([b]).group_by("run").aggregate(
                [("iter", "count"), ("iter", "min"), ("iter", "max"), ("rank", "distinct")])
            for run, n, lo, hi, rk in zip(*(g.column(c).to_pylist() for c in (
                    "run", "iter_count", "iter_min", "iter_max", "rank_distinct"))):
                acc = per.setdefault(run, [0, lo, hi, set()])
                acc[0] += n
                acc[1], acc[2] = min(acc[1], lo), max(acc[2], hi)
                acc[3].update(rk)
        seen: set[str] = set()
        for r in sorted(run_rows, key=lambda r: r["run"]):
            if r["run"] in seen:       # per-rank files of one run each carry the run record
                continue
            seen.add(r["run"])
            n, lo, hi, rk = per.get(r["run"], (0, None, None, set()))
            runs.append(RunSummary(
                run=r["run"], build=r["build"], tp_size=int(r["tp_size"]), frames=n,
                ranks=len(rk), iter_min=lo, iter_max=hi))

    frames_per_traceback = _frames_per_traceback(ds, rows)
    collector_formats: Counter[str] = Counter()
    for t in ("iterations", "events"):
        if rows[t]:
            for name, n in _counts(ds, t, "collector").items():
                for part in name.split("+"):
                    collector_formats[part] += n

    inputs = tuple((str(i.get("name")), str(i.get("kind")), int(i.get("size", 0)))
                   for i in meta.get("inputs", []))
    refused = tuple(f"{r.get('name')}: {r.get('reason')}" for r in meta.get("refused", []))
    return DatasetSummary(
        path=str(ds.path), schema_version=str(meta.get("schema_version")),
        tool_version=meta.get("tool_version"), inputs=inputs, refused=refused, rows=rows,
        ranks=tuple(sorted(ranks)), iter_ranges=iter_ranges, events_by_kind=events_by_kind,
        formats=formats, runs=tuple(runs), frames_per_traceback=frames_per_traceback,
        collector_formats=dict(sorted(collector_formats.items())))


def _columns(ds: ArrowDataset, table: str, columns: list[str]) -> pa.Table:
    """``columns`` of ``table``, read file by file with ``pyarrow.parquet``: ``ds.arrow`` reads
    through ``pyarrow.dataset``, whose import cost an ingest's summary ~0.01 s CPU (measured); a
    dataset of an older layout is read by ``ds.arrow`` (it upgrades the columns)."""
    files = ds.files(table)
    if ds.legacy or not files:
        return ds.arrow(table, columns=columns)
    return pa.concat_tables([pq.ParquetFile(f).read(columns=columns) for f in files])


def _frames_per_traceback(ds: ArrowDataset, rows: Mapping[str, int]) -> dict[int, int]:
    """Frame count -> traceback events (kinds traceback, adp_assert) with that many frames."""
    if not rows.get("events"):
        return {}
    ev = _columns(ds, "events", ["source", "line", "kind"])
    ev = ev.filter(pc.is_in(ev.column("kind"), pa.array(["traceback", "adp_assert"])))
    if ev.num_rows == 0:
        return {}
    per: Counter[tuple[str, int]] = Counter()
    if rows.get("traceback_frames"):
        fr = _columns(ds, "traceback_frames", ["source", "line"])
        per.update(zip(fr.column("source").to_pylist(), fr.column("line").to_pylist()))
    hist = Counter(per.get(key, 0) for key in zip(ev.column("source").to_pylist(),
                                                  ev.column("line").to_pylist()))
    return dict(sorted(hist.items()))


__all__ = ["ITER_TABLES", "RANK_TABLES", "DatasetSummary", "RunSummary", "summarize"]
