"""What-if sweeps: a grid of workload parameters x policies x seeds, simulated and replayed.

Each *cell* of the grid (one parameter point, one policy, one seed) is one task: the workload
simulator (:func:`forensics.simulate.simulate`) runs the scenario's workload with the point's
parameters under the policy (the build the fleet would run) and writes its trace into a scratch
directory; the trace is replayed under the same policy (``forensics.fleet_table.input_rows``) for the
fleet metrics (leak, crash, near misses, time to first leak); the scratch directory is removed.
On a Dask client the cells run as tasks (:mod:`forensics.cluster`); without one, in turn here.
The replay of a simulated run under its own policy reproduces the simulation
(``forensics.simulate``), so ``agrees`` (simulation and replay verdicts equal) is a check that
should always hold.

Tables (:class:`SweepResult`):

``runs`` (one row per cell)
    the grid's parameter columns, ``policy``, ``seed``, ``iters`` (replayed), ``sim_verdict``
    (``crash``/``leak``/``clean`` as the simulator saw it), ``verdict`` (the replay's),
    ``agrees``, and the metrics of :mod:`forensics.fleet`: ``leak``, ``leaks``, ``crash``,
    ``crash_iter``, ``crash_rank``, ``first_leak_iter``, ``time_to_first_leak``,
    ``near_miss_skips``, ``near_miss_cap``, ``near_miss``.
``configurations`` (one row per parameter point and policy; what ``forensics sweep -o``
writes as Parquet)
    the parameter columns, ``policy``, ``runs`` (seeds), prevalence as shares of the runs:
    ``leak``, ``crash``, ``near_miss``; ``leaks_mean`` (leaked dummies per run),
    ``crash_iter_min`` (earliest crash), ``time_to_first_leak_median``, and ``agrees`` (share).

A spec file (TOML)::

    scenario = "nvbug-6438685"   # the workload the grid varies (forensics simulate --scenario)
    iters = 300                  # loop bodies per run
    policies = ["prefix-2026", "fix-16161"]
    seeds = 3                    # seeds 0, 1, 2; or a list: [0, 7, 11]
    [grid]                       # Workload fields (forensics.simulate.workload), values to try
    ranks = [4, 8, 16]
    overlap = [true, false]
    burst_size = [0, 32]         # 0 turns bursts off
"""
from __future__ import annotations

import dataclasses
import itertools
import os
import shutil
import tempfile
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from forensics import cluster
from forensics.errors import ConfigError
from forensics.fleet_table import (
    METRIC_DTYPES,
    grid_workload,
    input_rows,
    plain_value,
    write_parquet,
)
from forensics.simulate import get_scenario, simulate
from replay.resolve import resolve_policies

PathLike = str | os.PathLike

#: The metrics of one replay kept per run (forensics.fleet_table.METRIC_DTYPES minus diverged_iter:
#: a run replayed under its own policy never departs from its recording).
RUN_METRICS = ("leak", "leaks", "crash", "crash_iter", "crash_rank", "first_leak_iter",
               "time_to_first_leak", "near_miss_skips", "near_miss_cap", "near_miss")
#: Columns of the ``configurations`` table after the parameters and ``policy``.
CONFIGURATION_COLUMNS = ("runs", "leak", "crash", "near_miss", "leaks_mean", "crash_iter_min",
                         "time_to_first_leak_median", "agrees")


#: Words a grid value of a yes/no field may be written as (TOML gives booleans already).
_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


def grid_fields() -> dict[str, Any]:
    """The workload fields a grid may vary, with their types (``int``, ``float``, ``bool``,
    ``str``, possibly ``| None``); the distributions (``kv_latency``...) are not grid fields."""
    from forensics.simulate.workload import Workload
    hints = typing.get_type_hints(Workload)
    out = {}
    for f in dataclasses.fields(Workload):
        kinds = set(typing.get_args(hints[f.name])) or {hints[f.name]}
        if kinds - {int, float, bool, str, type(None)}:
            continue
        out[f.name] = hints[f.name]
    return out


def grid_value(name: str, value: Any) -> Any:
    """One grid value of workload field ``name``, from the command line's text or a TOML value,
    as the field's type: ``grid_value("ranks", "8") == 8``, ``grid_value("overlap", "no") is
    False``. Raises ConfigError naming the field, its type and the value."""
    fields = grid_fields()
    if name not in fields:
        raise ConfigError(f"{name!r} is not a workload field a grid can vary",
                          hint="fields: " + ", ".join(sorted(fields)))
    kinds = set(typing.get_args(fields[name])) or {fields[name]}
    text = value.strip() if isinstance(value, str) else None
    if type(None) in kinds and (value is None or (text or "").lower() in ("none", "null")):
        return None
    if bool in kinds:
        if isinstance(value, bool):
            return value
        if text is not None and text.lower() in _TRUE + _FALSE:
            return text.lower() in _TRUE
    elif int in kinds or float in kinds:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if int in kinds and float not in kinds:
                if float(value).is_integer():
                    return int(value)
            else:
                return float(value)
        elif text is not None:
            for cast in ((int,) if float not in kinds else (float,)):
                try:
                    return cast(text)
                except ValueError:
                    pass
    elif str in kinds and isinstance(value, str):
        return value
    kind = " or ".join(k.__name__ if k is not type(None) else "none" for k in
                       sorted(kinds, key=lambda k: k is type(None)))
    examples = {"bool": "true/false", "int": "integers", "float": "numbers"}
    raise ConfigError(f"grid field {name} takes {examples.get(kind.split()[0], kind)}"
                      f"{' or none' if type(None) in kinds and kind != 'none' else ''}, got "
                      f"{value!r}")


@dataclasses.dataclass(frozen=True)
class SweepSpec:
    """A what-if grid (see the module docstring for the TOML form).

    Fields:
        scenario: the scenario whose workload the grid varies.
        grid: Workload field -> values to try (every combination is a parameter point).
        policies: the builds to run each point under.
        seeds: the seeds of each point and policy (the same seeds for every policy, so
            policies are compared on the same traffic).
        iters: loop bodies per run.
        arrival_per_rank: requests per iteration per rank (default the scenario's), so that
            larger fleets are as busy per rank.
    """

    scenario: str = "nvbug-6438685"
    grid: Mapping[str, tuple] = dataclasses.field(default_factory=dict)
    policies: tuple[str, ...] = ("prefix-2026", "fix-16161")
    seeds: tuple[int, ...] = (0, 1, 2)
    iters: int = 300
    arrival_per_rank: float | None = None

    def __post_init__(self) -> None:

        base = get_scenario(self.scenario).workload  # ConfigError names the scenarios
        fields = {f.name for f in dataclasses.fields(type(base))}
        bad = [k for k in self.grid if k not in fields]
        if bad:
            raise ConfigError(f"unknown workload field(s) in the grid: {', '.join(bad)}",
                              hint="fields: " + ", ".join(sorted(fields)))
        for k, v in self.grid.items():
            if not isinstance(v, (tuple, list)) or not v:
                raise ConfigError(f"grid field {k!r} needs a non-empty list of values")
        grid = {k: tuple(grid_value(k, x) for x in v) for k, v in self.grid.items()}
        for point in (dict(zip(grid, vals)) for vals in itertools.product(*grid.values())):
            try:  # every point a valid workload, checked before any simulation
                grid_workload(base, point, self.arrival_per_rank or 1.0)
            except (ConfigError, TypeError, ValueError) as e:
                where = ", ".join(f"{k}={v}" for k, v in point.items())
                raise ConfigError(f"grid point {where}: {getattr(e, 'message', e)}",
                                  hint=getattr(e, "hint", None)) from None
        if not self.policies:
            raise ConfigError("a sweep needs at least one policy")
        resolve_policies(list(self.policies))  # PolicyError for an unknown name
        if not self.seeds or any(int(s) < 0 for s in self.seeds):
            raise ConfigError(f"seeds must be non-negative and at least one, got {list(self.seeds)}")
        if self.iters < 1:
            raise ConfigError(f"iters must be at least 1, got {self.iters}")
        object.__setattr__(self, "grid", grid)
        object.__setattr__(self, "policies", tuple(self.policies))
        object.__setattr__(self, "seeds", tuple(int(s) for s in self.seeds))

    @property
    def points(self) -> list[dict[str, Any]]:
        """Every combination of the grid's values, in grid order."""
        keys = list(self.grid)
        return [dict(zip(keys, vals)) for vals in itertools.product(*(self.grid[k] for k in keys))]

    @property
    def size(self) -> int:
        """Runs the sweep simulates: points x policies x seeds."""
        return len(self.points) * len(self.policies) * len(self.seeds)

    def to_json(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "grid": {k: list(v) for k, v in self.grid.items()},
                "policies": list(self.policies), "seeds": list(self.seeds), "iters": self.iters,
                "arrival_per_rank": self.arrival_per_rank}

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], origin: str = "<spec>") -> SweepSpec:
        """From a parsed TOML document (module docstring); ``origin`` names it in errors."""
        known = {"scenario", "grid", "policies", "seeds", "iters", "arrival_per_rank"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown key(s) {', '.join(unknown)}", path=origin,
                              hint="keys: " + ", ".join(sorted(known)))
        kw: dict[str, Any] = {k: data[k] for k in known if k in data}
        if "seeds" in kw:
            kw["seeds"] = parse_seeds(kw["seeds"], origin)
        if "policies" in kw:
            if isinstance(kw["policies"], str):
                kw["policies"] = [kw["policies"]]
            kw["policies"] = tuple(kw["policies"])
        if "grid" in kw and not isinstance(kw["grid"], Mapping):
            raise ConfigError("[grid] must be a table of field = [values]", path=origin)
        try:
            return cls(**kw)
        except ConfigError as e:
            if e.path is None:
                raise ConfigError(e.message, path=origin, hint=e.hint) from None
            raise
        except TypeError as e:
            raise ConfigError(f"bad value: {e}", path=origin) from None

    @classmethod
    def from_toml(cls, path: PathLike) -> SweepSpec:
        """From a TOML file (module docstring).

        Raises:
            ConfigError: unreadable, not TOML (with the parser's line and column) or bad values.
        """
        try:
            import tomllib
        except ModuleNotFoundError:  # pragma: no cover - Python 3.10
            try:
                import tomli as tomllib  # type: ignore[no-redef]
            except ModuleNotFoundError:
                raise ConfigError("reading a sweep spec needs Python 3.11 or tomli", path=str(path)) from None
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"cannot read: {e}", path=str(path)) from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"not valid TOML: {e}", path=str(path)) from None
        return cls.from_mapping(data, str(path))


def parse_seeds(value: Any, origin: str = "<spec>") -> tuple[int, ...]:
    """``3`` -> ``(0, 1, 2)``; a list -> those seeds."""
    if isinstance(value, bool):
        raise ConfigError(f"seeds must be a count or a list of integers, got {value!r}", path=origin)
    if isinstance(value, int):
        if value < 1:
            raise ConfigError(f"a seed count must be at least 1, got {value}", path=origin)
        return tuple(range(value))
    if isinstance(value, (list, tuple)) and all(isinstance(s, int) and not isinstance(s, bool)
                                                 for s in value):
        return tuple(value)
    raise ConfigError(f"seeds must be a count or a list of integers, got {value!r}", path=origin)


@dataclasses.dataclass(frozen=True)
class SweepResult:
    """What a sweep found: ``runs`` and ``configurations`` (module docstring)."""

    spec: SweepSpec
    runs: pd.DataFrame
    configurations: pd.DataFrame

    def to_json(self) -> dict[str, Any]:
        """``{"spec": ..., "configurations": [row...]}`` with plain JSON values (missing values
        as null); what ``forensics sweep --json`` prints."""
        rows = [{k: plain_value(v) for k, v in row.items()}
                for row in self.configurations.astype(object).to_dict("records")]
        return {"spec": self.spec.to_json(), "configurations": rows}

    def __repr__(self) -> str:
        return (f"SweepResult({self.spec.scenario!r}, {len(self.configurations)} configurations, "
                f"{len(self.runs)} runs)")


def simulate_cell(scenario: str, params: dict[str, Any], policy: str, seed: int, iters: int,
                  arrival_per_rank: float | None, scratch: str | None) -> dict[str, Any]:
    """Task: simulate one cell of the grid, replay its trace under the same policy, one row.

    The trace is written into a fresh directory under ``scratch`` (default the system's
    temporary directory: local to the worker) and removed before returning.
    """

    sc = get_scenario(scenario)
    per_rank = arrival_per_rank if arrival_per_rank is not None else sc.workload.arrival_rate / sc.workload.ranks
    workload = grid_workload(sc.workload, params, per_rank)
    tmp = tempfile.mkdtemp(prefix="forensics-sweep-", dir=scratch)
    try:
        res = simulate(workload, out_dir=tmp, policy=policy, iters=iters, seed=seed, write=("trace",))
        (row,) = input_rows(tmp, tmp, {}, [policy], None, "long")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    verdict = "crash" if row["crash"] else ("leak" if row["leak"] else "clean")
    return {**params, "policy": policy, "seed": seed, "iters": row["iters"],
            "sim_verdict": res.verdict, "verdict": verdict, "agrees": verdict == res.verdict,
            **{k: row[k] for k in RUN_METRICS}}


def sweep(spec: SweepSpec | Mapping[str, Any] | PathLike, *, client: Any = None,
          output: PathLike | None = None, runs_output: PathLike | None = None,
          scratch: PathLike | None = None, done: Callable[[int, int], None] | None = None
          ) -> SweepResult:
    """``forensics.sweep(spec, client=...)``: simulate and replay every cell of a what-if grid.

    Args:
        spec: a :class:`SweepSpec`, a mapping of its fields (the TOML form) or a TOML file.
        client: a ``distributed.Client`` (:func:`forensics.cluster.connect`): one task per
            cell; None runs them here, one after the other. The tables are the same.
        output: write the ``configurations`` table to this Parquet file (the spec in its
            key-value metadata, ``forensics.meta``).
        runs_output: write the ``runs`` table to this Parquet file.
        scratch: where cells write their traces while they run (default each worker's
            temporary directory).
        done: called with ``(finished, total)`` after each cell.

    Raises:
        ConfigError, PolicyError: a bad spec (names the file).

    Example:
        >>> r = forensics.sweep({"grid": {"ranks": [4, 8]}, "seeds": 2, "iters": 100})  # doctest: +SKIP
        >>> r.configurations[["ranks", "policy", "runs", "leak", "crash", "near_miss"]]    # doctest: +SKIP
    """

    if isinstance(spec, (str, os.PathLike)):
        spec = SweepSpec.from_toml(spec)
    elif not isinstance(spec, SweepSpec):
        spec = SweepSpec.from_mapping(spec)
    tasks = [(spec.scenario, point, policy, seed, spec.iters, spec.arrival_per_rank,
              None if scratch is None else str(scratch))
             for point in spec.points for policy in spec.policies for seed in spec.seeds]
    rows = cluster.map_tasks(simulate_cell, tasks, client=client, done=done, key="sweep-cell")
    params = list(spec.grid)
    runs = pd.DataFrame(rows, columns=[*params, "policy", "seed", "iters", "sim_verdict", "verdict",
                                       "agrees", *RUN_METRICS])
    for k in RUN_METRICS:
        runs[k] = runs[k].astype(METRIC_DTYPES[k])
    runs["iters"] = runs["iters"].astype("Int64")
    runs["agrees"] = runs["agrees"].astype("boolean")
    runs["policy"] = pd.Categorical(runs["policy"], categories=list(spec.policies))
    configurations = configuration_table(runs, params)
    if output is not None:
        write_parquet(configurations, output, table_name="sweep.configurations", meta=spec.to_json())
    if runs_output is not None:
        write_parquet(runs, runs_output, table_name="sweep.runs", meta=spec.to_json())
    return SweepResult(spec=spec, runs=runs, configurations=configurations)


def configuration_table(runs: pd.DataFrame, params: Sequence[str]) -> pd.DataFrame:
    """Prevalence per parameter point and policy from a ``runs`` table (module docstring)."""
    keys = [*params, "policy"]
    g = runs.groupby(keys, observed=True, sort=False, dropna=False)

    def share(col: str) -> pd.Series:
        return g[col].agg(lambda s: float(s.astype("boolean").fillna(False).mean()))

    out = pd.DataFrame({
        "runs": g.size(),
        "leak": share("leak"),
        "crash": share("crash"),
        "near_miss": share("near_miss"),
        "leaks_mean": g["leaks"].agg(lambda s: float(s.astype("Float64").mean())),
        "crash_iter_min": g["crash_iter"].min().astype("Int64"),
        "time_to_first_leak_median": g["time_to_first_leak"].agg(
            lambda s: s.dropna().astype(float).median() if s.notna().any() else None).astype("Float64"),
        "agrees": share("agrees"),
    }).reset_index()
    out["runs"] = out["runs"].astype("int64")
    return out[[*keys, *CONFIGURATION_COLUMNS]]


__all__ = [
    "CONFIGURATION_COLUMNS",
    "RUN_METRICS",
    "SweepResult",
    "SweepSpec",
    "configuration_table",
    "parse_seeds",
    "simulate_cell",
    "sweep",
]
