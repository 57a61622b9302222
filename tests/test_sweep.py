"""``forensics.sweep`` and ``forensics sweep``: the what-if grid, run serially (the cluster path
is compared with this one in tests/test_cluster.py)."""
from __future__ import annotations

import json

import pandas as pd
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import forensics
from forensics.cli import cli
from forensics.errors import ConfigError, PolicyError
from forensics.what_if import CONFIGURATION_COLUMNS, SweepSpec, configuration_table, parse_seeds

SPEC = """\
scenario = "nvbug-6438685"
iters = 120
policies = ["prefix-2026", "fix-16161"]
seeds = 2
[grid]
ranks = [8]
overlap = [true, false]
"""


def test_spec_from_toml(tmp_path):
    p = tmp_path / "sweep.toml"
    p.write_text(SPEC)
    spec = SweepSpec.from_toml(p)
    assert spec.grid == {"ranks": (8,), "overlap": (True, False)}
    assert spec.seeds == (0, 1) and spec.iters == 120 and spec.size == 2 * 2 * 2
    assert spec.points == [{"ranks": 8, "overlap": True}, {"ranks": 8, "overlap": False}]


@pytest.mark.parametrize("text, match", [
    ("iters = 10\ncolour = 'red'\n", "unknown key"),
    ("[grid]\nhue = [1]\n", "unknown workload field"),
    ("seeds = -1\n", "seed count"),
    ("seeds = [0, 'one']\n", "seeds must be"),
    ("[grid]\nranks = []\n", "non-empty list"),
    ("iters = 0\n", "iters must be at least 1"),
])
def test_bad_spec_names_the_file(tmp_path, text, match):
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(ConfigError, match=match) as e:
        SweepSpec.from_toml(p)
    assert e.value.path == str(p)


def test_bad_toml_and_policy(tmp_path):
    p = tmp_path / "broken.toml"
    p.write_text("iters = \n")
    with pytest.raises(ConfigError, match="not valid TOML.*line 1") as e:
        SweepSpec.from_toml(p)
    assert e.value.path == str(p)
    with pytest.raises(PolicyError):
        SweepSpec(policies=("no-such-build",))


def test_parse_seeds():
    assert parse_seeds(3) == (0, 1, 2) and parse_seeds([5, 9]) == (5, 9)
    with pytest.raises(ConfigError):
        parse_seeds(True)


def test_configuration_table_by_hand():
    """Two seeds of one point under one policy: one leaks and crashes at 40, the other leaks
    (2 dummies, first 30 iterations in) without a crash: leak 2/2, crash 1/2, leaks 1.5 a run,
    earliest crash 40, median time to first leak (10 + 30) / 2 = 20."""
    runs = pd.DataFrame({
        "ranks": [8, 8], "policy": pd.Categorical(["prefix-2026"] * 2), "seed": [0, 1],
        "leak": pd.array([True, True], "boolean"), "crash": pd.array([True, False], "boolean"),
        "near_miss": pd.array([False, True], "boolean"), "leaks": pd.array([1, 2], "Int64"),
        "crash_iter": pd.array([40, None], "Int64"), "time_to_first_leak": pd.array([10, 30], "Int64"),
        "agrees": pd.array([True, True], "boolean")})
    t = configuration_table(runs, ["ranks"])
    assert list(t.columns) == ["ranks", "policy", *CONFIGURATION_COLUMNS]
    row = t.iloc[0]
    assert (row["runs"], row["leak"], row["crash"], row["near_miss"]) == (2, 1.0, 0.5, 0.5)
    assert (row["leaks_mean"], row["crash_iter_min"], row["time_to_first_leak_median"]) == (1.5, 40, 20.0)


def test_sweep_finds_the_leak_where_the_domain_puts_it(tmp_path):
    """A leak needs a rank holding only GENERATION_TO_COMPLETE requests, which only the overlap
    scheduler leaves in active_requests (domain doc); fix-16161's window predicate pads such a
    rank, so it never leaks. prefix-2026 with overlap on leaks at 8 ranks (the NVBug sample's
    workload: it leaks by iteration 19)."""
    p = tmp_path / "sweep.toml"
    p.write_text(SPEC)
    r = forensics.sweep(p, output=tmp_path / "conf.parquet", runs_output=tmp_path / "runs.parquet")
    runs = r.runs
    assert len(runs) == 8 and runs["agrees"].all()
    assert not runs[runs["policy"] == "fix-16161"]["leak"].any()
    assert not runs[~runs["overlap"]]["leak"].any()
    assert runs[(runs["policy"] == "prefix-2026") & runs["overlap"]]["leak"].all()
    conf = r.configurations
    assert len(conf) == 4 and (conf["runs"] == 2).all()
    hot = conf[(conf["policy"] == "prefix-2026") & conf["overlap"]].iloc[0]
    assert hot["leak"] == 1.0
    written = pq.read_table(tmp_path / "conf.parquet")
    meta = written.schema.metadata
    assert meta[b"forensics.table"] == b"sweep.configurations"
    assert json.loads(meta[b"forensics.meta"])["grid"] == {"ranks": [8], "overlap": [True, False]}
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "conf.parquet")[["ranks", "runs", "leak"]],
                                  conf[["ranks", "runs", "leak"]])
    assert len(pd.read_parquet(tmp_path / "runs.parquet")) == 8


def test_cli_sweep(tmp_path):
    runner = CliRunner()
    p = tmp_path / "sweep.toml"
    p.write_text(SPEC)
    r = runner.invoke(cli, ["sweep", str(p), "--seeds", "1", "--grid", "overlap=true",
                            "--policy", "prefix-2026", "--json", "-o", str(tmp_path / "c.parquet")])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["spec"]["seeds"] == [0] and doc["spec"]["grid"] == {"ranks": [8], "overlap": [True]}
    (conf,) = doc["configurations"]
    assert (conf["policy"], conf["runs"], conf["leak"]) == ("prefix-2026", 1, 1.0)
    assert (tmp_path / "c.parquet").is_file()

    r = runner.invoke(cli, ["sweep", "--grid", "ranks=4", "--seeds", "1", "--iters", "40"])
    assert r.exit_code == 0 and "prefix-2026" in r.output and "fix-16161" in r.output
    for bad in (["--grid", "ranks"], ["--grid", "hue=1"], ["--seeds", "0"]):
        r = runner.invoke(cli, ["sweep", *bad])
        assert r.exit_code == 2, (bad, r.output)
