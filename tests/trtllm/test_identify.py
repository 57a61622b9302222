"""``identify``: which catalogue policy a build behaves like (issue 12 item 4).

Every §10 era fixture tree is identified; the property that the real code's verdict on every
sample trace equals the verdict of the catalogue policy ``identify`` names is checked for every
era. Eras the catalogue does not model yet are marked xfail by the entry's *name* (or, where the
entry exists under that name but lacks what the era needs, by the Policy field that models it),
so they become real tests as soon as the entry exists.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from trtllm_checkouts import ERA_FIXTURES, place_era

from replay.catalogue import CATALOGUE
from replay.config import RunConfig
from replay.walk import run
from replay.frames import RunFrames
from replay.identify import battery, identify
from replay.policy import Policy

#: The property is checked with the run's model inside and outside every gate.
MODELS = ("deepseek_v4", "kimi_k2")
SAMPLES = sorted((Path(__file__).resolve().parents[2] / "traces/samples").glob("*/trace.jsonl"))

#: Catalogue policies identify may name for each fixture era (the catalogue's names, as it
#: models §10's eras; an older catalogue's nearest entry where it matched then).
NAMES = {
    "mid-2025": ("mid-2025", "legacy-2025"),
    "late-2025": ("legacy-2025", "late-2025"),
    "early-2026": ("early-2026", "legacy-2025"),
    "prefix-2026": ("prefix-2026",),
    "16279": ("fix-16279",),
    "000515e": ("tolerant-17278",),
    "002f3cc": ("postpad-17379",),
    "0004396": ("newest",),
    "dkv": ("dkv",),
    "fork-ingestion-task": ("newest",),
}
#: What the catalogue must have for the era to be modelled: entry names, or ``field:NAME`` for
#: a Policy field (the per-era dummy role, the model gates, the forward intent arrive as fields).
NEEDS = {
    "mid-2025": (),
    "late-2025": ("field:dummy_role",),
    "early-2026": (),
    "prefix-2026": (),
    "16279": ("fix-16279",),
    "000515e": ("field:kv_precheck",),
    "002f3cc": ("field:kv_precheck",),
    "0004396": ("field:kv_precheck",),
    "dkv": ("dkv",),
    "fork-ingestion-task": ("field:intent_gate",),
}


def _missing(era: str) -> list[str]:
    fields = {f.name for f in dataclasses.fields(Policy)}
    out = []
    for need in NEEDS[era]:
        if need.startswith("field:"):
            if need[6:] not in fields:
                out.append(f"field Policy.{need[6:]} (the catalogue modelling {era})")
        elif need not in CATALOGUE:
            out.append(f"entry {need}")
    return out


def _eras() -> list:
    """Every era; the ones the catalogue does not model yet marked xfail (strict=False)."""
    return [pytest.param(era, marks=pytest.mark.xfail(
        strict=False, reason=f"needs catalogue {', '.join(_missing(era))}"))
        if _missing(era) else era for era in ERA_FIXTURES]


@pytest.fixture(scope="module")
def identified(tmp_path_factory):
    return {era: identify(f"trtllm:{place_era(tmp_path_factory.mktemp(era), era)}")
            for era in ERA_FIXTURES}


@pytest.mark.parametrize("era", _eras())
def test_identify_names_each_fixture_era(identified, era):
    result = identified[era]
    assert result.named in NAMES[era], "\n".join(result.summary())
    assert result.ok and not result.unmatched


def _verdict(result):
    leaks = [(lk.rank, lk.iter_created, lk.iter_skipped) for lk in result.leak_records]
    return leaks, None if result.crash is None else (result.crash.iter, result.crash.rank)


@pytest.fixture(scope="module")
def samples():
    if not SAMPLES:
        pytest.skip("no sample traces")
    return {p.parent.name: RunFrames.from_records([json.loads(line) for line in p.open()])
            for p in SAMPLES}


@pytest.mark.parametrize("era", _eras())
def test_real_code_verdict_equals_the_named_policys_on_every_sample(identified, samples, era):
    """For every sample trace, the era's real code and the catalogue policy identify names
    leak the same dummies and stop at the same (iter, rank), with the run's model named both
    inside (deepseek_v4) and outside (kimi_k2) every model gate: the samples name no model,
    and the two sides treat an unknown one differently by design (the real code assumes the
    gate open and says so; a gated catalogue entry may replay both ways)."""
    result = identified[era]
    if result.named is None:
        pytest.fail("identify names no catalogue policy although the catalogue models the era:\n"
                    + "\n".join(result.summary()))
    from replay.resolve import resolve_policy
    real = resolve_policy(result.spec)
    for name, frames in samples.items():
        for model in MODELS:
            cfg = dataclasses.replace(frames.config, model_arch=model)
            assert _verdict(run(frames, cfg, real)) == \
                _verdict(run(frames, cfg, result.named)), f"{era} on {name}, model {model}"


def test_battery_observations_are_the_hand_worked_ones(identified):
    """The pre-fix 2026 build on leak-then-cap (worked in test_bisect's docstring): rank 0 pads
    at iter 0, the fleet skips (rank 1's TO_COMPLETE request counts but is not scheduled), the
    dummy leaks and rank 0, at the cap 1 plus its dummy, asserts at iter 1. The newest build on
    all-await-kv pads nobody in the pad step (the all-reduced intent is NONE)."""
    by_name = {b.behaviour.name: b for b in identified["prefix-2026"].behaviours}
    leak = by_name["leak-then-cap"].real
    assert leak.leaks == ((0, 0, 0),) and leak.stop == (1, 0)
    assert "prefix-2026" in by_name["leak-then-cap"].matches
    assert "legacy-2025" not in by_name["leak-then-cap"].matches  # no cap: no assert
    newest = {b.behaviour.name: b for b in identified["0004396"].behaviours}
    assert not any(row[2] for row in newest["all-await-kv"].real.rows)
    early = {b.behaviour.name: b for b in identified["early-2026"].behaviours}
    assert early["surplus-at-cap"].real.stop is None  # no cap on expected: nothing trips
    assert identified["prefix-2026"].behaviours[0].behaviour.section == "§9"
    assert len({b.name for b in battery()}) == len(battery())


def test_a_new_catalogue_entry_is_compared_without_touching_identify(identified, monkeypatch,
                                                                     tmp_path):
    twin = dataclasses.replace(CATALOGUE["prefix-2026"], name="prefix-2026-twin")
    monkeypatch.setitem(CATALOGUE, "prefix-2026-twin", twin)
    result = identify(f"trtllm:{place_era(tmp_path, 'prefix-2026')}")
    assert all("prefix-2026-twin" in b.matches for b in result.behaviours)
    assert result.named in ("prefix-2026", "prefix-2026-twin")


def _always_pads(tmp_path) -> Path:
    root = place_era(tmp_path, "prefix-2026")
    ex = root / "tensorrt_llm/_torch/pyexecutor/py_executor.py"
    ex.write_text(ex.read_text().replace(
        "        if self.expected_num_active_requests > 0 and \\\n"
        "                self._count_schedulable_active_requests() == 0:\n",
        "        if self.expected_num_active_requests > 0:\n"))
    return root


def test_cli_exit_codes_and_json(tmp_path):
    from forensics.cli import cli
    runner = CliRunner()
    good = place_era(tmp_path / "good", "prefix-2026")
    out = runner.invoke(cli, ["identify", f"trtllm:{good}"])
    assert out.exit_code == 0, out.output
    assert "behaves as catalogue policy prefix-2026 on all" in out.output
    assert "leak-then-cap" in out.output
    bad = _always_pads(tmp_path / "bad")
    out = runner.invoke(cli, ["identify", f"trtllm:{bad}", "--json"])
    assert out.exit_code == 1
    doc = json.loads(out.output)
    assert doc["ok"] is False and doc["named"] is None
    assert "schedulable-never-pads" in doc["unmatched"]
    row = next(b for b in doc["behaviours"] if b["behaviour"] == "schedulable-never-pads")
    assert row["matches"] == [] and "pads r0@0" in row["build"]
    out = runner.invoke(cli, ["identify", f"trtllm:{tmp_path / 'nowhere'}"])
    assert out.exit_code == 2 and "no such directory" in out.output


def test_battery_runs_on_its_own_configs():
    """Each case's run record names its configuration; the gate cases leave the gate."""
    cases = {b.name: b for b in battery()}
    run_of = {n: RunConfig.from_record(c.records[0]) for n, c in cases.items()}
    assert run_of["pipeline-parallel-gate"].pp_size == 2
    assert run_of["model-gate"].model_arch == "llama" and run_of["model-gate"].overlap_scheduler
    assert not run_of["adp-off-never-pads"].enable_attention_dp
    assert not run_of["all-await-kv"].overlap_scheduler


def test_postmortem_names_the_era_of_a_real_code_policy(tmp_path):
    """A post-mortem given real pad code of the pre-fix era (the crashing build) says which
    catalogue entry it behaves as, in the next step and in findings.json."""
    from forensics.pipeline import postmortem
    sample = Path(__file__).resolve().parents[2] / "traces/samples/nvbug-6438685/trace.jsonl"
    root = place_era(tmp_path / "trt", "prefix-2026")
    spec = f"trtllm:{root}"
    r = postmortem([sample], tmp_path / "report", policies=["prefix-2026", spec])
    assert r.identified[spec].named == "prefix-2026"
    assert (f"The real code of {spec} behaves as catalogue entry prefix-2026") in r.next_step
    f = json.loads(r.findings_json.read_text())
    assert f["identified"][spec]["named"] == "prefix-2026"


@pytest.mark.parametrize("entry", ["newest", "kv-connector-19164"])
def test_a_catalogue_entry_given_by_name_names_itself(entry):
    """newest and kv-connector-19164 (#19250, merged: both shipped) decide alike on every
    behaviour; identifying either by name names it, not its twin that comes later in the
    catalogue, and the twin is among the matches."""
    result = identify(entry)
    twin = ({"newest", "kv-connector-19164"} - {entry}).pop()
    assert all(entry in b.matches and twin in b.matches for b in result.behaviours)
    assert result.named == entry
