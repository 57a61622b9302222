"""adp-forensics: crash forensics and replay for TensorRT-LLM's attention-DP executor.

Pipeline: ingest -> dataset -> reconstruct -> replay -> report. The library entry points:

- ``forensics.ingest(inputs, output)``: logs, stats JSON and traces into a Parquet dataset.
- ``forensics.load(path)``: a dataset with one pandas DataFrame per table.
- ``forensics.postmortem(inputs, out_dir)``: ingest, replay every policy, write the report.
- ``forensics.investigate(*inputs)``: the same analysis as DataFrames and figures for notebooks.
- ``forensics.fleet(inputs, client=None)``: one row of verdicts per run, on a Dask cluster or not.
- ``forensics.sweep(spec, client=None)``: a simulated what-if grid, prevalence per configuration.
"""
from __future__ import annotations

from forensics.version import __version__


def __getattr__(name: str):
    # Heavier entry points are imported on first use so `import forensics` stays cheap (it
    # runs in every pytest session through the `pytest11` plugin, so no pandas/pyarrow here).
    if name in ("Dataset", "load"):
        from forensics.dataset import store
        return getattr(store, name)
    if name == "ingest":
        from forensics.readers import ingest
        return ingest
    if name == "postmortem":
        from forensics.pipeline import postmortem
        return postmortem
    if name == "investigate":
        from forensics.investigation import investigate
        return investigate
    if name == "fleet":
        from forensics.fleet_table import fleet
        return fleet
    if name == "sweep":
        from forensics.what_if import sweep
        return sweep
    raise AttributeError(name)


__all__ = ["__version__", "Dataset", "load", "ingest", "investigate", "postmortem", "fleet", "sweep"]


def __dir__() -> list[str]:
    # The lazy entry points above are part of the module: tab completion and dir() show them.
    return sorted(set(globals()) | set(__all__))
