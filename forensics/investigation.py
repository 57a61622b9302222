"""``forensics.investigate(INPUT...)``: one run, loaded once, as DataFrames and figures for notebooks.

The object ingests (or loads) the inputs once, reconstructs the traced run and replays it under
the chosen policies on first use, then hands out pandas DataFrames (``iterations``, ``events``,
``frames``, ``requests``, ``decisions``/``ledger`` per policy or combined with a ``policy``
column, ``leaks``, ``verdicts``), the report's figures as matplotlib Figures (``plot_*`` call
:mod:`forensics.report.figures`; ``forensics postmortem`` draws the same views as SVG,
:mod:`forensics.report.svg_figures`) and an HTML
summary for Jupyter (``_repr_html_``, self-contained: no script, image or link to anything else).

Example:
    >>> import forensics                                                     # doctest: +SKIP
    >>> inv = forensics.investigate("traces/samples/nvbug-6438685")         # doctest: +SKIP
    >>> inv.verdicts[["policy", "verdict", "crash_iter"]]                     # doctest: +SKIP
    >>> inv.plot_active("prefix-2026")                                       # doctest: +SKIP
"""
from __future__ import annotations

import html
import logging
import os
import tempfile
from collections.abc import Iterable, Sequence
from functools import cached_property
from typing import Any

import pandas as pd
import pyarrow.compute as pc

from forensics.dataset.store import to_pandas
from forensics.errors import DatasetError, NoTraceError
from forensics.readers import as_dataset
from forensics.reconstruct import frame_state, log_state
from forensics.report import figures as F
from forensics.report.crash_signatures import crash_in_logs, find_signatures
from forensics.report.logs_only import log_decisions
from forensics.report.narrative import comparison_policy
from forensics.report.paths import clean_builds
from forensics.report.summary import summarize
from forensics.verdicts import matches_log_crash, story_policy
from replay.streaming import replay_windows
from replay.frame_windows import FrameWindows
from replay.frames import RunFrames
from replay.leak_table import LEAK_COLUMNS as _REPLAY_LEAK_COLUMNS
from replay.leak_table import leak_frame
from replay.resolve import resolve_policies, resolve_policy

log = logging.getLogger(__name__)

PathLike = str | os.PathLike

#: Columns of :attr:`Investigation.verdicts`.
VERDICT_COLUMNS = ("policy", "title", "verdict", "leaks", "crash", "crash_iter", "crash_rank",
                   "crash_kind", "first_leak_iter", "reproduces_log_crash", "is_recording_build",
                   "divergence_iter", "divergence_field")
#: Columns of :attr:`Investigation.leaks`: ``policy``, then those of ``ReplayResult.leaks``
#: (``replay.leak_table``, with their dtypes).
LEAK_COLUMNS = ("policy", *_REPLAY_LEAK_COLUMNS)


def investigate(*inputs: PathLike | Iterable[PathLike], policies: Sequence[str] | None = None,
                cache_dir: PathLike | None = None, run: str | None = None) -> Investigation:
    """Load a run for interactive analysis.

    Args:
        inputs: a dataset directory, or logs / stats / traces (files or directories) that
            ``forensics ingest`` accepts; lists are flattened.
        policies: policy specs to replay (default: the whole catalogue).
        cache_dir: where raw inputs are ingested (reused while they are unchanged); default a
            temporary directory.
        run: the traced run to replay when the inputs hold several (default: the first).

    Raises:
        InputError, DatasetError, PolicyError: bad input or an unknown policy (the message names
            the file and line).
    """

    flat: list[PathLike] = []
    for x in inputs:
        if isinstance(x, (str, os.PathLike)):
            flat.append(x)
        else:
            flat.extend(x)
    if not flat:
        raise TypeError("investigate() needs at least one input")
    pols = resolve_policies(list(policies) if policies else None)  # bad names fail before ingest
    ds = as_dataset(flat, cache_dir=cache_dir)
    return Investigation(ds, pols, run=run, inputs=tuple(str(x) for x in flat))


class Investigation:
    """One run loaded once: tables, replays per policy, figures, an HTML summary.

    Replays run on first use and are kept. Attributes that name dataset tables (``iterations``,
    ``events``, ``stats``, ``runs``, ``frames``, ``requests``, ``unparsed``) are the dataset's
    DataFrames unchanged (``forensics.dataset.schema``); ``frames`` and ``requests`` are
    narrowed to the investigated run when the dataset holds several.
    """

    def __init__(self, dataset: Any, policies: Sequence[Any], *, run: str | None = None,
                 inputs: tuple[str, ...] = ()):

        self.dataset = dataset
        # Resolved once: a ``trtllm:`` or ``py:`` spec reads and compiles source code.
        self._resolved: dict[str, Any] = {}
        for spec in policies:
            pol = resolve_policy(spec)
            self._resolved[pol.name] = pol
        self.policies: tuple[str, ...] = tuple(self._resolved)
        self.inputs = inputs
        runs = dataset.traced_runs()
        if run is not None and run not in runs:
            raise DatasetError(f"no traced run {run!r} in the input",
                               hint="runs: " + (", ".join(runs) or "none"))
        #: The traced run replayed, or None when the inputs hold logs only.
        self.run: str | None = run if run is not None else (runs[0] if runs else None)
        self._results: dict[str, Any] = {}
        self._replay_dir = None   # the streamed replays' files, removed with the object

    # ------------------------------------------------------------------ dataset tables
    @property
    def iterations(self) -> pd.DataFrame:
        return self.dataset.iterations

    @property
    def events(self) -> pd.DataFrame:
        return self.dataset.events

    @property
    def stats(self) -> pd.DataFrame:
        return self.dataset.stats

    @property
    def runs(self) -> pd.DataFrame:
        return self.dataset.runs

    @property
    def unparsed(self) -> pd.DataFrame:
        return self.dataset.unparsed

    @property
    def frames(self) -> pd.DataFrame:
        return self._of_run(self.dataset.frames)

    @property
    def requests(self) -> pd.DataFrame:
        return self._of_run(self.dataset.requests)

    def _of_run(self, df: pd.DataFrame) -> pd.DataFrame:
        if self.run is None or not len(df) or df["run"].nunique() <= 1:
            return df
        return df[df["run"] == self.run].reset_index(drop=True)

    @cached_property
    def summary(self):
        """The dataset summary (``forensics.report.summary.DatasetSummary``)."""
        return summarize(self.dataset)

    # ------------------------------------------------------------------ reconstruction
    @cached_property
    def run_frames(self):
        """The run's frames as arrays (:class:`replay.frames.RunFrames`)."""
        self._need_trace()
        return RunFrames.from_dataset(self.dataset, run=self.run)

    @cached_property
    def windows(self):
        """The run read in iteration windows (:class:`replay.frame_windows.FrameWindows`): what the
        replays stream over, holding one window in memory."""
        self._need_trace()
        return FrameWindows(self.dataset, run=self.run)

    @property
    def config(self):
        """The run configuration (:class:`replay.config.RunConfig`), or None without a trace."""
        return self.windows.config if self.run is not None else None

    @cached_property
    def reconstruction(self) -> pd.DataFrame:
        """Per (iter, rank) state from the trace frames (``forensics.reconstruct.frame_state``)."""
        self._need_trace()
        return frame_state(self.dataset, run=self.run)

    @cached_property
    def log_reconstruction(self) -> pd.DataFrame:
        """Per (iter, rank) batch sizes and ``can_queue`` from iteration lines alone."""
        return log_state(self.dataset, self.config.tp_size if self.run is not None else None)

    @cached_property
    def signatures(self) -> list:
        """Crash-related events of the logs (``forensics.report.crash_signatures.Signature``)."""
        return find_signatures(self.events, [self._resolved[p] for p in self.policies],
                               config=self.config, iterations=self.iterations)

    @property
    def log_crash(self):
        """The crash the logs show (a ``Signature``), or None."""
        return crash_in_logs(self.signatures)

    # ------------------------------------------------------------------ replay
    def result(self, policy: str):
        """The replay of the run under ``policy`` (:class:`replay.results.ReplayResult`).

        The first call replays every chosen policy in one streamed pass over the run's windows
        (decisions and ledgers in Parquet files under a temporary directory, read when used);
        a policy asked for later is streamed on its own."""
        self._need_trace()
        name = self._policy(policy)
        if name not in self._results:
            todo = [p for p in self.policies if p not in self._results]
            if name not in todo:
                todo = [name]
            if self._replay_dir is None:
                self._replay_dir = tempfile.TemporaryDirectory(prefix="adp-investigation-")
            out = os.path.join(self._replay_dir.name, f"pass-{len(self._results):03d}")
            self._results.update(replay_windows(self.windows, [self._resolved[p] for p in todo], out))
        return self._results[name]

    @property
    def results(self) -> dict[str, Any]:
        """Every chosen policy's replay, in the order given."""
        return {p: self.result(p) for p in self.policies}

    def decisions(self, policy: str | None = None) -> pd.DataFrame:
        """Per (iter, rank) decisions of one policy, or of all with a leading ``policy`` column.

        Columns: ``replay.results`` (``DECISION_COLUMNS``).
        """
        if policy is not None:
            return self.result(policy).decisions
        return _long({p: r.decisions for p, r in self.results.items()})

    def ledger(self, policy: str | None = None) -> pd.DataFrame:
        """The dummy ledger of one policy, or of all with a leading ``policy`` column."""
        if policy is not None:
            return self.result(policy).ledger
        return _long({p: r.ledger for p, r in self.results.items()})

    @property
    def leaks(self) -> pd.DataFrame:
        """One row per leaked dummy across the policies (columns ``LEAK_COLUMNS``): each
        policy's ``ReplayResult.leaks`` (the fatal leak first) after a ``policy`` column
        (categorical, in policy order, as in :meth:`decisions`)."""
        if self.run is None or not self.policies:
            return pd.DataFrame(leak_frame(())).assign(policy=pd.Categorical([]))[list(LEAK_COLUMNS)]
        return _long({p: r.leaks for p, r in self.results.items()})[list(LEAK_COLUMNS)]

    @property
    def verdicts(self) -> pd.DataFrame:
        """One row per policy: crash / leak / clean, the crash point, the first leak, whether it
        reproduces the crash the logs show, and the first recorded decision it departs from."""
        rows = []
        if self.run is not None:
            build = self.config.build
            sig = self.log_crash
            for p, r in self.results.items():
                c, div = r.crash, r.first_divergence
                rows.append({
                    "policy": p, "title": r.policy.title,
                    "verdict": r.verdict,
                    "leaks": len(r.leaks), "crash": c is not None,
                    "crash_iter": None if c is None else c.iter,
                    "crash_rank": None if c is None else c.rank,
                    "crash_kind": None if c is None else c.kind,
                    "first_leak_iter": (None if r.leaks.empty
                                        else int(r.leaks["iter_skipped"].min())),
                    "reproduces_log_crash": matches_log_crash(c, sig),
                    "is_recording_build": p == build,
                    "divergence_iter": None if div is None else div.iter,
                    "divergence_field": None if div is None else div.field})
        df = pd.DataFrame(rows, columns=list(VERDICT_COLUMNS))
        for col in ("crash_iter", "crash_rank", "first_leak_iter", "divergence_iter"):
            df[col] = df[col].astype("Int64")
        for col in ("reproduces_log_crash",):
            df[col] = df[col].astype("boolean")
        return df

    def explain(self, policy: str | None = None) -> str:
        """The causal chains of ``policy``, one paragraph per leak and one for the crash.

        Default policy: the one the post-mortem report tells (the one reproducing the logged crash,
        preferring the recording build; else the recording build when it leaks or crashes; else
        the first that crashes, else the first that leaks)."""
        name = self._policy(policy) if policy is not None else self._story_policy()
        if name is None:
            return "No traced run: nothing was replayed (record a request-state trace)."
        lines = self.result(name).explain()
        return "\n\n".join(lines) if lines else f"{name}: no leak, no crash."

    # ------------------------------------------------------------------ figures
    def plot_active(self, policy: str | None = None, **kwargs):
        """Active requests per rank against expected and the cap
        (:func:`forensics.report.figures.active_vs_expected`); ``kwargs`` go to it."""
        name = self._policy(policy) if policy is not None else self._story_policy()
        self._need_trace()
        r = self.result(name)
        kwargs.setdefault("leaks", r.leaks)
        kwargs.setdefault("crash", F.crash_marker(r.crash))
        kwargs.setdefault("cap", self.config.cap if r.policy.cap else None)
        kwargs.setdefault("title", f"Active requests per rank under {name} (run {self.run})")
        return F.active_vs_expected(r.decisions, **kwargs)

    def plot_strip(self, policies: Sequence[str] | str | None = None, **kwargs):
        """Rank x iteration strips, one panel per policy (:func:`~forensics.report.figures.
        decision_strip`); windows follow the first policy's leaks and crash. Without a trace, the
        strip of the iteration logs."""
        if self.run is None:
            dec = log_decisions(self.iterations)
            kwargs.setdefault("title", "What each rank logged, per iteration (no request traces)")
            return F.decision_strip({"iteration logs": dec}, **kwargs)
        if isinstance(policies, str):
            policies = [policies]
        names = [self._policy(p) for p in policies] if policies else self._strip_policies()
        first = self.result(names[0])
        kwargs.setdefault("leaks", first.leaks)
        kwargs.setdefault("crash", F.crash_marker(first.crash))
        kwargs.setdefault("title", f"What each rank did, per iteration (run {self.run})")
        return F.decision_strip({n: self.result(n).decisions for n in names}, **kwargs)

    def plot_states(self, policy: str | None = None, iteration: int | None = None, **kwargs):
        """Request states per rank at one iteration, with the dummies ``policy`` carried into it
        (:func:`~forensics.report.figures.state_composition`). Default iteration: the crash,
        else the one after the first leak, else the last."""
        name = self._policy(policy) if policy is not None else self._story_policy()
        self._need_trace()
        r = self.result(name)
        dec = r.decisions
        if iteration is None:
            iteration = F.state_iteration(dec, r)
        if iteration is None:
            raise DatasetError("nothing was replayed: no iteration to draw")
        req = self._requests_at(int(iteration))
        at = dec[dec["iter"] == iteration]
        leaked = {int(rk): 1 for rk, c in zip(at["rank"], at["carried_dummy"]) if c}
        kwargs.setdefault("leaked_dummies", leaked)
        if "expected" not in kwargs and len(at):
            kwargs["expected"] = int(at["expected"].max())
        kwargs.setdefault("cap", self.config.cap if r.policy.cap else None)
        kwargs.setdefault("ranks", list(range(self.config.tp_size)))
        kwargs.setdefault("title", f"Request states per rank at iteration {iteration} ({name})")
        return F.state_composition(req, iteration=int(iteration), **kwargs)

    # ------------------------------------------------------------------ display
    def __repr__(self) -> str:
        return (f"Investigation(run={self.run!r}, policies={list(self.policies)}, "
                f"dataset={str(getattr(self.dataset, 'path', ''))!r})")

    def _repr_html_(self) -> str:
        """A self-contained summary: inputs, configuration, crash in the logs, verdicts."""
        e = html.escape
        out = ['<div class="adp-forensics-investigation">',
               f"<h3>adp-forensics investigation: {e(self.run or 'logs only (no trace)')}</h3>"]
        rows = [("inputs", ", ".join(self.inputs) or str(getattr(self.dataset, "path", ""))),
                ("iteration lines", len(self.iterations)), ("events", len(self.events)),
                ("frames", len(self.frames)), ("unparsed lines", len(self.unparsed))]
        if self.run is not None:
            c = self.config
            rows += [("ranks (tp_size)", c.tp_size), ("pp_size", c.pp_size),
                     ("max_batch_size", c.max_batch_size), ("cap", c.cap),
                     ("disaggregated", c.disaggregated), ("overlap scheduler", c.overlap_scheduler),
                     ("recording build", c.build or "unknown")]
        sig = self.log_crash
        rows.append(("crash in the logs", "none" if sig is None else
                     f"{sig.kind.value} on rank {sig.rank} at iteration {sig.iter} ({sig.where})"))
        out.append(_table(["", ""], rows, header=False))
        if self.run is not None:
            v = self.verdicts
            out.append("<h4>Replay verdicts</h4>")
            out.append(_table(["policy", "verdict", "leaks", "crash", "first leak",
                               "reproduces logged crash"],
                              [(r.policy, r.verdict, r.leaks,
                                "" if pd.isna(r.crash_iter) else f"iter {r.crash_iter}, rank {r.crash_rank}",
                                "" if pd.isna(r.first_leak_iter) else f"iter {r.first_leak_iter}",
                                "" if pd.isna(r.reproduces_log_crash) else
                                ("yes" if r.reproduces_log_crash else "no"))
                               for r in v.itertuples()]))
            story = self._story_policy()
            if story is not None:
                chain = self.result(story).explain()
                if chain:
                    out.append(f"<h4>Causal chain under {e(story)}</h4>")
                    out.append(f"<p>{e(chain[0])}</p>")
                    if len(chain) > 1 and self.result(story).crash is not None:
                        out.append(f"<p>{e(chain[-1])}</p>")
        else:
            out.append("<p>No request-state trace: nothing replayed. Record one (traces/FORMAT.md) "
                       "and log every rank's iteration line (TLLM_PROFILE_LOG_RANKS=all).</p>")
        out.append("</div>")
        return "\n".join(out)

    # ------------------------------------------------------------------ helpers
    def _requests_at(self, iteration: int) -> pd.DataFrame:
        """The run's recorded requests at one iteration, read with a filter (not the table)."""
        filters = [("iter", "==", iteration)]
        t = self.dataset.arrow("requests", filters=filters)
        if t.num_rows and len(set(t.column("run").to_pylist())) > 1:
            t = t.filter(pc.equal(t.column("run"), self.run))
        return to_pandas(t).reset_index(drop=True)

    def _need_trace(self) -> None:
        if self.run is None:
            raise NoTraceError()

    def _policy(self, name: str) -> str:
        """The name of policy ``name``, resolved (and kept) on first use; PolicyError if unknown."""
        if name not in self._resolved:
            pol = resolve_policy(name)
            self._resolved.setdefault(pol.name, pol)
            return pol.name
        return name

    def _story_policy(self) -> str | None:
        """The policy whose story to tell, chosen as the post-mortem report chooses it
        (``forensics.verdicts.story_policy``), else the first policy."""
        if self.run is None or not self.policies:
            return None
        return story_policy(self.verdicts.itertuples()) or self.policies[0]

    def _strip_policies(self) -> list[str]:
        """The story's policy, then the build the post-mortem report compares it with: the
        first it recommends (merged, clean on this run's path), else the first clean one."""
        story = self._story_policy()
        names = [story] if story else []
        clean = [p for p, r in self.results.items() if r.ok]
        advised = [a.policy for a in clean_builds([self._resolved[p] for p in self.policies],
                                                  self.config, replayed_clean=set(clean))]
        other = comparison_policy(story, clean, advised)
        if other:
            names.append(other)
        return names


# ---------------------------------------------------------------------- module helpers

def _long(per: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Per-policy frames stacked with a leading ``policy`` column (categorical, given order)."""
    parts = [df.assign(policy=p) for p, df in per.items()]
    if not parts:
        return pd.DataFrame({"policy": []})
    out = pd.concat(parts, ignore_index=True)
    out["policy"] = pd.Categorical(out["policy"], categories=list(per))
    return out[["policy"] + [c for c in out.columns if c != "policy"]]


def _table(columns: Sequence[str], rows: Iterable[Sequence[Any]], *, header: bool = True) -> str:
    e = html.escape
    out = ["<table>"]
    if header:
        out.append("<thead><tr>" + "".join(f"<th>{e(str(h))}</th>" for h in columns) + "</tr></thead>")
    out.append("<tbody>")
    for r in rows:
        out.append("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in r) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)



__all__ = ["LEAK_COLUMNS", "VERDICT_COLUMNS", "Investigation", "investigate"]
