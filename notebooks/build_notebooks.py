"""Write the example notebooks (without outputs) from the cell sources below.

Run ``python notebooks/build_notebooks.py`` after editing a cell; commit the ``.ipynb`` files as
written (no outputs, no execution counts: ``tests/test_notebooks.py`` checks this and runs them).
"""
from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent

#: Finds the repository from the notebook's working directory (nbclient runs it in notebooks/).
FIND_ROOT = '''\
from pathlib import Path

ROOT = next(p for p in [Path.cwd(), *Path.cwd().parents] if (p / "traces" / "samples").is_dir())'''

#: Finds the bundled samples from wherever the notebook runs: the checkout ``forensics`` is
#: imported from first (an editable install), then the working directory and its parents.
FIND_SAMPLES = '''\
from pathlib import Path

import forensics


def checkout_with_samples() -> Path:
    """The checkout holding traces/samples (the one forensics is imported from, else cwd upwards)."""
    for p in [Path(forensics.__file__).resolve().parents[1], Path.cwd(), *Path.cwd().parents]:
        if (p / "traces" / "samples").is_dir():
            return p
    raise FileNotFoundError("traces/samples not found: install adp-forensics from a checkout "
                            "(pip install -e .) or set ROOT to the checkout")


ROOT = checkout_with_samples()'''

POSTMORTEM = [
    new_markdown_cell("""\
# Post-mortem of NVBug 6438685, step by step

A bundled crash sample (`traces/samples/nvbug-6438685`, simulated: 8 wide-EP generation-server
ranks, `max_batch_size` 4, overlap scheduler on, build `prefix-2026`) holds the three things a dead
fleet leaves behind: the executor log (with the `AssertionError`), the IterationStats JSON Lines and
the request-state trace. This notebook goes from those files to the causal chain and to what to
change, using only library calls:

1. ingest the files into a dataset;
2. reconstruct what every rank held in every iteration;
3. replay the crashing build (`prefix-2026`) against the merged fix the report recommends
   (`fix-16279`) and the rest of the catalogue;
4. read the causal chain;
5. draw the figures the post-mortem report draws;
6. decide what to change."""),
    new_code_cell(FIND_SAMPLES + '''

%matplotlib inline
import pandas as pd

SAMPLE = ROOT / "traces" / "samples" / "nvbug-6438685"
sorted(p.name for p in SAMPLE.iterdir())'''),
    new_markdown_cell("""\
## 1. Ingest

`forensics.investigate` ingests the inputs once (into a temporary dataset; pass `cache_dir=` to
keep it) and replays lazily. Displaying it gives an HTML summary: the configuration, the crash the
logs show and the verdict of each executor version."""),
    new_code_cell('''inv = forensics.investigate(SAMPLE)
inv'''),
    new_code_cell('''from forensics.report.summary import render_text

print(render_text(inv.summary))'''),
    new_markdown_cell("""\
The dataset's tables are plain DataFrames. The crash-related events of the log, and the crash
signature the post-mortem matches against the replays:"""),
    new_code_cell('''inv.events[["source", "line", "kind", "rank"]]'''),
    new_code_cell('''sig = inv.log_crash
sig.kind.value, sig.rank, sig.iter, sig.where, sig.policies'''),
    new_markdown_cell("""\
## 2. Reconstruct

One row per (iteration, rank) from the trace frames: `len(active_requests)` at pad entry (recorded
dummies included), requests in the scheduler window, the all-gathered totals and
`expected_num_active_requests`. Around the crash iteration the rank that died holds more than
`expected` allows:"""),
    new_code_cell('''rec = inv.reconstruction
crash_iter = int(sig.iter)
rec[rec["iter"].between(crash_iter - 1, crash_iter)][
    ["iter", "rank", "active", "dummies", "real", "in_window", "expected", "surplus", "padded",
     "scheduled", "can_queue"]]'''),
    new_markdown_cell("""\
What the crashing rank held, request by request (`state` is the state's name, `state_value` the
C++ enum's int value):"""),
    new_code_cell('''req = inv.requests
at = req[(req["iter"] == crash_iter) & (req["rank"] == sig.rank)]
at[["iter", "rank", "pos", "request_id", "state", "state_value", "dummy"]]'''),
    new_markdown_cell("""\
## 3. Replay: the crashing build against the patched one

Each policy models one executor version (`replay/catalogue.py`). The replay drops the recorded
dummies, carries the policy's own and decides pad, batch, `can_queue` and dummy removal iteration
by iteration. Replaying the recording under its own build (`prefix-2026`) must reproduce every
recorded decision (`divergence_iter` is empty) and the logged crash."""),
    new_code_cell('''inv.verdicts[["policy", "verdict", "leaks", "crash_iter", "crash_rank", "first_leak_iter",
              "reproduces_log_crash", "is_recording_build", "divergence_iter"]]'''),
    new_markdown_cell("""\
The first skipped iteration with a leak, side by side: under `prefix-2026` one rank offers a batch
of 0 (it holds only `GENERATION_TO_COMPLETE` requests, which its predicate counts but the scheduler
refuses), so `can_queue` is False fleet-wide and the dummies padded elsewhere survive. Under
`fix-16279` that rank is padded too, every batch is non-zero and nothing is skipped."""),
    new_code_cell('''first = inv.leaks.query("policy == 'prefix-2026'")["iter_skipped"].min()
cols = ["rank", "active", "schedulable", "window_real", "expected", "padded", "batch", "can_queue",
        "dummy_alive"]
legacy = inv.decisions("prefix-2026").query("iter == @first")[cols].set_index("rank")
patched = inv.decisions("fix-16279").query("iter == @first")[cols].set_index("rank")
pd.concat({"prefix-2026": legacy, "fix-16279": patched}, axis=1)'''),
    new_markdown_cell("""\
Every dummy each version created, and whether it leaked (survived a skipped iteration):"""),
    new_code_cell('''ledger = inv.ledger()
ledger.groupby("policy", observed=True).agg(dummies=("dummy", "size"), leaked=("leaked", "sum"),
                                            never_removed=("iter_removed", lambda s: int(s.isna().sum())))'''),
    new_markdown_cell("""\
## 4. The causal chain

The three interacting behaviours of the bug, in plain words with ranks, iterations, request ids
and states: the fatal leak first (its chain ends with the crash), then the crash itself."""),
    new_code_cell('''res = inv.result("prefix-2026")
res'''),
    new_code_cell('''chain = res.explain()
print(chain[0])
print()
print(chain[-1])'''),
    new_markdown_cell("""\
The other leaks happen the same way: grouped by mechanism (same predicate gap, same missing
rollback) the 22 leaks are one paragraph, the way the report tells them. `res.leaks` is the
table (the columns of `inv.leaks` but `policy`, the fatal leak first); `res.leak_records` holds
the same leaks as records, row for row, with each cause rank's request states."""),
    new_code_cell('''from forensics.causal_chain import mechanisms

for m in mechanisms(res):
    print(m.title(), "-", m.text)
res.leaks.head()'''),
    new_markdown_cell("""\
## 5. The figures

The same functions `forensics postmortem` draws with (`forensics.report.figures`): active requests
per rank against `expected` and the cap, with leak and crash markers; the rank x iteration strip of
the recording build against the build the report recommends (`fix-16279`, the default); the
request states per rank at the crash iteration with the leaked dummy on top. Long runs are windowed around the interesting iterations."""),
    new_code_cell('''inv.plot_active("prefix-2026")'''),
    new_code_cell('''inv.plot_strip()'''),
    new_code_cell('''inv.plot_states("prefix-2026")'''),
    new_markdown_cell("""\
## 6. What to change

Which versions survive this exact request mix, and which build reproduces what the logs show:"""),
    new_code_cell('''v = inv.verdicts.set_index("policy")
survivors = v.index[v["verdict"] == "clean"].tolist()
culprit = v.index[v["reproduces_log_crash"].fillna(False).astype(bool)].tolist()
print("reproduces the logged crash:", ", ".join(culprit))
print("no leak, no crash on this traffic:", ", ".join(survivors))'''),
    new_markdown_cell("""\
* The crash is the `prefix-2026` entry assert: a dummy leaked through a fleet-wide skip caused by a
  rank whose only requests were `GENERATION_TO_COMPLETE`, and next iteration that rank sat at the
  cap plus its leaked dummy.
* Deploy a build with PR #16279 (merged; #16161, closed as its duplicate, never shipped: the pad
  predicate uses the scheduler window on the disaggregated path) or newer; every later version in
  the catalogue is clean here.
* The aggregated path keeps counting `GENERATION_TO_COMPLETE` in every catalogue build (see the
  `aggregated-overlap` sample): there the newest builds only warn about a leaked dummy. The
  report's recommendation names, per build, the paths that stay open.
* Keep recording: `TLLM_PROFILE_LOG_RANKS=all` and the request-state trace (`traces/FORMAT.md`)
  make every step above possible. `forensics postmortem traces/samples/nvbug-6438685 -o report/`
  writes the same findings as a report."""),
]

FLEET = [
    new_markdown_cell("""\
# Fleet analysis: where do dummies leak, and which builds crash?

A benchmark campaign runs the same model over many configurations. Here the campaign is a
what-if sweep (`forensics.sweep`): the NVBug 6438685 generation-server workload over ranks x
`max_batch_size` x overlap scheduler on/off x KV-transfer burst size (36 configurations), each
simulated (`forensics.simulate`) under the crashing build `prefix-2026` and under the fix
`fix-16161`, with two seeds each, and every simulated trace replayed for the fleet metrics. The CLI
runs the same sweep: `forensics sweep --grid ranks=4,8,16 --grid overlap=true,false ... -o
sweep.parquet`, and with `--workers 2` (the `[dask]` extra) on a local Dask cluster.

Definitions (`forensics.fleet`):

* **leak**: a dummy survived a fleet-wide skipped iteration;
* **crash**: the run stopped at the entry assert (or a failed dummy allocation);
* **near miss**: a leaked dummy survived without a crash (`near_miss_skips`), or a rank carrying a
  leaked dummy came within one request of the cap, `active >= cap - 1` (`near_miss_cap`);
* **time to first leak**: iterations from the start of the run to the first skip a dummy
  survived."""),
    new_code_cell('''%matplotlib inline
import matplotlib.pyplot as plt
import pandas as pd

import forensics

SPEC = {
    "scenario": "nvbug-6438685",
    "grid": {"ranks": [4, 8, 16], "max_batch_size": [2, 4, 8], "overlap": [True, False],
             "burst_size": [16, 48]},
    "policies": ["prefix-2026", "fix-16161"],
    "seeds": 2,
    "iters": 250,
}
result = forensics.sweep(SPEC)   # forensics.sweep(SPEC, client=client) runs it on a cluster
result'''),
    new_markdown_cell("""\
`result.runs` has one row per simulated run; `result.configurations` one row per configuration
and policy, with prevalence as the share of seeds (what `forensics sweep -o` writes as Parquet).
`agrees` checks that replaying each simulated trace reproduces what the simulator saw:"""),
    new_code_cell('''runs = result.runs
print(len(runs), "runs; replay agrees with the simulation in", int(runs["agrees"].sum()))
result.configurations.head()'''),
    new_markdown_cell("""\
## Leak and crash prevalence per version

Share of runs in which each version leaks, crashes or has a near miss:"""),
    new_code_cell('''by_policy = runs.groupby("policy", observed=True)[["leak", "crash", "near_miss"]].mean()
by_policy'''),
    new_code_cell('''ax = by_policy.astype(float).plot.bar(figsize=(7, 3.5), rot=0)
ax.set_ylabel("share of runs")
ax.set_title("Leak, crash and near-miss prevalence per executor version")
plt.show()'''),
    new_markdown_cell("""\
## Per configuration

Crash prevalence per configuration for the crashing build: leaks need the overlap scheduler (a
rank holding only `GENERATION_TO_COMPLETE` requests), crashes need a small cap."""),
    new_code_cell('''conf = result.configurations
pre = conf[conf["policy"] == "prefix-2026"]
crash = pre.pivot_table(index=["overlap", "max_batch_size"], columns="ranks", values="crash",
                        aggfunc="mean", observed=True)
fig, ax = plt.subplots(figsize=(6, 3.5), layout="constrained")
im = ax.imshow(crash.to_numpy(dtype=float), cmap="Reds", vmin=0, vmax=1)
ax.set_xticks(range(len(crash.columns)), [str(c) for c in crash.columns])
ax.set_yticks(range(len(crash.index)), [f"overlap={o}, mbs={m}" for o, m in crash.index])
ax.set_xlabel("ranks")
ax.set_title("prefix-2026: share of runs that crash")
fig.colorbar(im, ax=ax)
plt.show()'''),
    new_code_cell('''conf.pivot_table(index=["overlap", "max_batch_size"], columns="policy", values=["leak", "crash"],
                 aggfunc="mean", observed=True)'''),
    new_markdown_cell("""\
## Near misses

Runs where a dummy leaked without killing the fleet, or a rank carrying one came within one
request of the cap: these builds were one burst away from the assert."""),
    new_code_cell('''cols = ["ranks", "max_batch_size", "overlap", "burst_size", "seed", "leaks", "near_miss_skips",
        "near_miss_cap", "crash_iter"]
runs[(runs["policy"] == "prefix-2026") & runs["near_miss"]][cols].sort_values(
    ["near_miss_cap", "near_miss_skips"], ascending=False).head(10)'''),
    new_markdown_cell("""\
## Time to first leak

Iterations from the start of the run to the first leak, per number of ranks (more ranks: more
chances that one of them holds only retiring requests):"""),
    new_code_cell('''ttfl = runs[(runs["policy"] == "prefix-2026") & runs["leak"]]
ttfl.groupby("ranks")["time_to_first_leak"].describe()[["count", "min", "50%", "max"]]'''),
    new_code_cell('''fig, ax = plt.subplots(figsize=(7, 3.5), layout="constrained")
for ranks, g in ttfl.groupby("ranks"):
    ax.scatter(g["time_to_first_leak"], g["crash_iter"].astype("Float64").fillna(-10), label=f"{ranks} ranks")
ax.set_xlabel("time to first leak (iterations)")
ax.set_ylabel("crash iteration (-10: no crash)")
ax.set_title("prefix-2026: first leak against the crash")
ax.legend()
plt.show()'''),
    new_markdown_cell("""\
## Recorded runs under every version

A sweep runs each version forward. A fleet of *recorded* runs is the other question: what would
the other versions have decided on the same request mix? `forensics.fleet` replays each recorded
run under every catalogue version (one row per run, columns `<policy>.<metric>`; `forensics fleet
RUN_DIR... --csv` prints the same). Here a few runs are recorded under `prefix-2026` with
`forensics.fleet_table.simulate_grid`; for other versions a replay is a counterfactual, and
`diverged_iter` says where it departs from the recording."""),
    new_code_cell('''import shutil
import tempfile

from forensics.fleet_table import simulate_grid

RUNS = tempfile.mkdtemp(prefix="fleet-")
grid = simulate_grid(RUNS, grid={"ranks": (8,), "overlap": (True, False), "burst_size": (16, 48)},
                     iters=250, policy="prefix-2026")
wide = forensics.fleet(grid)
wide.filter(regex="^(ranks|overlap|burst_size|prefix-2026.(leak|crash)$|fix-16161.(leak|crash)$|newest.crash$)")'''),
    new_markdown_cell("""\
On a Dask cluster (the `[dask]` extra) the same calls take a client: each run, or each cell of a
sweep, is one task that reads its files where it runs (`docs/scale.md`):

```python
from forensics.cluster import connect

with connect(workers=2) as client:          # or connect(scheduler="tcp://head:8786")
    table = forensics.fleet(run_dirs, client=client, output="fleet.parquet")
    result = forensics.sweep(SPEC, client=client)
```"""),
    new_code_cell('''shutil.rmtree(RUNS)  # the simulated runs were only needed for this notebook'''),
]


def build(cells, prefix: str) -> nbformat.NotebookNode:
    for i, cell in enumerate(cells):
        cell.id = f"{prefix}-{i:02d}"  # stable ids: rebuilding changes nothing that was not edited
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def main() -> None:
    for name, cells in (("01-postmortem.ipynb", POSTMORTEM), ("02-fleet.ipynb", FLEET)):
        nb = build(cells, name.split("-", 1)[1].split(".")[0])
        nbformat.validate(nb)
        nbformat.write(nb, HERE / name)


if __name__ == "__main__":
    main()
