"""``forensics simulate``: run a workload forward under a policy and write consistent artefacts.

The simulator owns the workload (arrivals, routing, request states, ``workload.py`` and
``run_loop.py``); every executor decision comes from ``replay.step.decide``, so a simulated run
behaves as the replay engine says that build behaves, and replaying its trace under the same
policy reproduces every recorded decision. It writes, consistently with each other:

* ``executor.log``: iteration lines (V1-V5), warnings and the crash traceback (``log_writer``);
* ``stats.jsonl``: IterationStats JSON Lines with the ADP per-rank quirks (``stats_writer``);
* ``trace.jsonl``: the request-state trace, format v2 (``trace_writer``).

Example:
    >>> from forensics.simulate import simulate                      # doctest: +SKIP
    >>> res = simulate("nvbug-6438685", out_dir="out/")                # doctest: +SKIP
    >>> res.summary.crash_iter, res.summary.crash_ranks                 # doctest: +SKIP
"""
from __future__ import annotations

import contextlib
import dataclasses
import gzip
import io
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from forensics.errors import ConfigError
from forensics.simulate.log_writer import LOG_FORMATS, LogWriter, parse_log_ranks
from forensics.simulate.run_loop import LoopSummary, run
from forensics.simulate.scenarios import (
    SCENARIOS,
    Scenario,
    get_scenario,
    scenario_names,
)
from forensics.simulate.stats_writer import StatsWriter
from forensics.simulate.trace_writer import TraceWriter, run_record
from forensics.simulate.workload import LengthDist, Workload, workload_parameters
from replay.policy import Policy
from replay.resolve import resolve_policy

#: File names written into ``out_dir``.
LOG_NAME, STATS_NAME, TRACE_NAME = "executor.log", "stats.jsonl", "trace.jsonl"
#: Seed used when neither the call nor the scenario gives one.
DEFAULT_SEED = 0
#: Loop bodies run for a bare workload when ``iters`` is not given.
DEFAULT_ITERS = 1000
#: Policy a bare workload runs under when ``policy`` is not given.
DEFAULT_POLICY = "fix-16161"


@dataclasses.dataclass(frozen=True)
class SimulationResult:
    """What a simulation wrote and what happened.

    Fields:
        scenario: the scenario name (None for a bare workload).
        policy: the policy name.
        seed: the seed used.
        workload: the workload simulated.
        files: written paths by role (``log``, ``stats``, ``trace``, ``expect``: the
            ``trace.expect.toml`` replay expectation of the producing policy).
        summary: the run's :class:`~forensics.simulate.run_loop.LoopSummary`.
    """

    scenario: str | None
    policy: str
    seed: int
    workload: Workload
    files: dict[str, Path]
    summary: LoopSummary

    @property
    def verdict(self) -> str:
        """``crash``, ``leak`` or ``clean`` (the vocabulary of ``Scenario.verdicts``)."""
        if self.summary.crash_iter is not None:
            return "crash"
        return "leak" if self.summary.leaked_dummies else "clean"

    def to_json(self) -> dict:
        """What ``forensics simulate --json`` prints."""
        s = self.summary
        return {"scenario": self.scenario, "policy": self.policy, "seed": self.seed, "iters": s.iters,
                "verdict": self.verdict, "crash_iter": s.crash_iter, "crash_ranks": list(s.crash_ranks),
                "leaked_dummies": s.leaked_dummies, "skipped_iters": s.skipped_iters,
                "files": {k: str(v) for k, v in self.files.items()}}


def _open(path: Path, compress: str | None):
    """A text stream; ``gz``/``zst`` output is byte-identical for a seed (no mtime, fixed level)."""
    if compress is None:
        return open(path, "w", encoding="utf-8", newline="\n", buffering=1 << 20)
    if compress == "gz":
        raw = open(path, "wb")  # noqa: SIM115 (closed by _Closing)
        gz = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6)
        return _Closing(io.TextIOWrapper(gz, encoding="utf-8", newline="\n"), raw)
    if compress == "zst":
        import zstandard
        raw = open(path, "wb")  # noqa: SIM115 (closed by _Closing)
        zw = zstandard.ZstdCompressor(level=3).stream_writer(raw)
        return _Closing(io.TextIOWrapper(zw, encoding="utf-8", newline="\n"), raw)
    raise ConfigError(f"unknown compression {compress!r}", hint="use gz or zst")


class _Closing(contextlib.AbstractContextManager):
    """A wrapper stream that also closes the raw file under it."""

    def __init__(self, text, raw):
        self.text, self.raw = text, raw

    def write(self, s: str) -> int:
        return self.text.write(s)

    def close(self) -> None:
        self.text.close()
        if not self.raw.closed:
            self.raw.close()

    def __exit__(self, *exc) -> None:
        self.close()


def _expect_toml(policy: str, scenario: str, seed: int, s: LoopSummary) -> str:
    """``trace.expect.toml`` (``forensics.expectations``): what replaying the trace under the
    policy that produced it must show, so ``pytest --adp-traces DIR`` checks the sample."""
    lines = [f"# Written by forensics simulate (scenario {scenario}, seed {seed}): replaying",
             "# trace.jsonl under the policy that produced it must show this.",
             f'["{policy}"]', f"leak = {'true' if s.leaked_dummies else 'false'}"]
    if s.first_leak_iter is not None:
        lines.append(f"first_leak_iter = {s.first_leak_iter}")
    if s.crash_iter is None:
        lines.append("crash = false")
    else:
        lines += [f"crash_iter = {s.crash_iter}", f"crash_rank = {min(s.crash_ranks)}"]
    return "\n".join(lines) + "\n"


class _ProgressSink:
    """Reports each loop body to a progress callback (a sink like the writers)."""

    def __init__(self, progress: Callable[[int, int], None], total: int):
        self.progress, self.total, self.done = progress, total, 0

    def body(self, b) -> None:
        self.done += 1
        self.progress(self.done, self.total)

    def close(self) -> None:
        pass


def simulate(scenario_or_workload: str | Scenario | Workload, *, out_dir: str | os.PathLike,
             policy: str | Policy | None = None, ranks: int | None = None, iters: int | None = None,
             seed: int | None = None, cap: int | None = None, log_format: str = "V4",
             log_ranks: str | Iterable[int] = "all", launcher: str | None = None,
             prefix_style: str = "rank", write: Iterable[str] = ("log", "stats", "trace"),
             compression: str | None = None, state_names: bool = True,
             version: str | None = None, force: bool = False,
             progress: Callable[[int, int], None] | None = None) -> SimulationResult:
    """Simulate a scenario (or a bare workload) under a policy and write its artefacts.

    Args:
        scenario_or_workload: a scenario name, a :class:`Scenario` or a :class:`Workload`.
        out_dir: directory to write into (created); files of the same names already there are
            refused unless ``force``.
        policy: catalogue name or Policy; default: the scenario's (``fix-16161`` for a workload).
        ranks: override the number of attention-DP ranks.
        iters: loop bodies to run (default: the scenario's).
        seed: seed of every random draw (default: the scenario's).
        cap: override ``max_num_active_requests``.
        log_format: iteration-line variant ``V1`` .. ``V5``.
        log_ranks: ``"all"`` or the ranks that print iteration lines (``"0"``).
        launcher: None, ``"srun"`` or ``"mpirun"`` line prefixes.
        prefix_style: logger prefix, see ``log_writer.PREFIX_STYLES``.
        write: which artefacts to write (``log``, ``stats``, ``trace``).
        compression: None, ``"gz"`` or ``"zst"``: compress every file (``.gz``/``.zst`` suffix;
            still byte-identical for a seed). Advisable for ``fleet-1h`` (GBs uncompressed).
        state_names: trace states as names (else ints).
        version: print a ``TensorRT-LLM version`` banner first.
        progress: called with ``(bodies done, bodies to run)`` after each loop body (bars).

    Returns:
        A :class:`SimulationResult`.

    Raises:
        ConfigError: an unknown scenario, bad parameters (0 ranks, cap below 1, ...).
        PolicyError: an unknown policy.
    """
    if isinstance(scenario_or_workload, str):
        scenario_or_workload = get_scenario(scenario_or_workload)
    if isinstance(scenario_or_workload, Scenario):
        sc: Scenario | None = scenario_or_workload
        workload = sc.workload
    elif isinstance(scenario_or_workload, Workload):
        sc, workload = None, scenario_or_workload
    else:
        raise ConfigError(f"expected a scenario name, Scenario or Workload, got "
                          f"{type(scenario_or_workload).__name__}")
    changes = {}
    if ranks is not None:
        changes["ranks"] = ranks
    if cap is not None:
        changes["cap"] = cap
    if changes:
        workload = workload.with_overrides(**changes)
    pol = resolve_policy(policy if policy is not None else (sc.policy if sc else DEFAULT_POLICY))
    n_iters = iters if iters is not None else (sc.iters if sc else DEFAULT_ITERS)
    if n_iters < 1:
        raise ConfigError(f"iters must be at least 1, got {n_iters}")
    the_seed = seed if seed is not None else (sc.seed if sc else DEFAULT_SEED)
    if the_seed < 0:
        raise ConfigError(f"seed must be >= 0, got {the_seed}")
    if log_format.upper() not in LOG_FORMATS:
        raise ConfigError(f"unknown log format {log_format!r}", hint="formats: " + ", ".join(LOG_FORMATS))
    parse_log_ranks(log_ranks)
    wanted = set(write)
    unknown = wanted - {"log", "stats", "trace"}
    if unknown:
        raise ConfigError(f"unknown artefacts {sorted(unknown)}", hint="choose among log, stats, trace")

    if compression not in (None, "gz", "zst"):
        raise ConfigError(f"unknown compression {compression!r}", hint="use gz or zst")
    suffix = "" if compression is None else "." + compression
    from forensics.output_dir import atomic_path, make_dir, refuse_existing

    out = make_dir(out_dir)
    config = workload.run_config(build=pol.name)
    name = sc.name if sc else "workload"
    files: dict[str, Path] = {}
    targets = {"log": LOG_NAME + suffix, "stats": STATS_NAME + suffix, "trace": TRACE_NAME + suffix}
    expect_name = TRACE_NAME.rsplit(".", 1)[0] + ".expect.toml"
    refuse_existing([out / targets[k] for k in ("log", "stats", "trace") if k in wanted]
                    + ([out / expect_name] if "trace" in wanted else []), force=force)
    # Each file is written beside its target and renamed into place at the end: an interrupted
    # or failed run leaves the directory as it was.
    with contextlib.ExitStack() as stack:
        def place(key: str) -> Path:
            files[key] = out / targets[key]
            return stack.enter_context(atomic_path(files[key]))
        sinks = []
        if "log" in wanted:
            f = stack.enter_context(_open(place("log"), compression))
            sinks.append(LogWriter(f, ranks=workload.ranks, overlap=workload.overlap,
                                   log_format=log_format, log_ranks=log_ranks, launcher=launcher,
                                   prefix_style=prefix_style, version=version))
        if "stats" in wanted:
            f = stack.enter_context(_open(place("stats"), compression))
            sinks.append(StatsWriter(f, ranks=workload.ranks,
                                     max_num_active_requests=workload.effective_cap))
        if "trace" in wanted:
            f = stack.enter_context(_open(place("trace"), compression))
            rec = run_record(config, build=pol.name, run_id=f"sim-{name}-{pol.name}-{the_seed}",
                             extra={"simulator": {"scenario": name, "seed": the_seed,
                                                  "iters": n_iters,
                                                  "workload": workload_parameters(workload)}})
            sinks.append(TraceWriter(f, record=rec, state_names=state_names,
                                     postpad=pol.postpad_empty_batch and config.enable_attention_dp))
        if progress is not None:
            sinks.append(_ProgressSink(progress, n_iters))
        summary = run(workload, pol, iters=n_iters, seed=the_seed, sinks=sinks)
        for s in sinks:
            s.close()
    if "trace" in wanted:
        files["expect"] = out / expect_name
        with atomic_path(files["expect"]) as tmp:
            tmp.write_text(_expect_toml(pol.name, name, the_seed, summary), encoding="utf-8")
    return SimulationResult(scenario=sc.name if sc else None, policy=pol.name, seed=the_seed,
                            workload=workload, files=files, summary=summary)


__all__ = [
    "SCENARIOS",
    "LengthDist",
    "LoopSummary",
    "Scenario",
    "SimulationResult",
    "Workload",
    "get_scenario",
    "scenario_names",
    "simulate",
]
