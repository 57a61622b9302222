"""The post-mortem's open paths carry a minimal witness from exploration, closed paths say
"no counterexample up to the bound" (issue 24 item 4)."""
from __future__ import annotations

import json

from forensics.minimize import replay_records
from forensics.pipeline import postmortem
from forensics.open_paths import PATH_BOUND, clean_builds, path_gap, with_evidence, witness_files
from replay.catalogue import CATALOGUE, get_policy
from replay.config import RunConfig
from replay.explore import ConfigSpace


def test_open_paths_carry_replayable_witnesses_and_closed_ones_say_so():
    """newest on a disaggregated non-overlap run at pp_size 1: its own path is closed (the
    forward intent and the post-schedule pad); the aggregated path keeps counting
    GENERATION_TO_COMPLETE and pp_size 2 keeps the legacy count: both open, each with a trace
    that leaks when replayed under newest."""
    config = RunConfig(tp_size=4, disaggregated=True, overlap_scheduler=False, max_batch_size=2)
    (advice,) = [a for a in clean_builds([get_policy("newest")], config)]
    assert advice.here is None
    assert advice.here_evidence.startswith("no counterexample in ")
    assert advice.here_evidence.endswith("up to " + PATH_BOUND.describe())
    assert [p.label for p in advice.open_paths] == ["aggregated, pp_size 1", "disaggregated, pp_size 2"]
    files = witness_files([advice])
    for gap in advice.open_paths:
        w = gap.witness
        assert w is not None and w.kind == "leak" and gap.evidence.startswith("minimal witness: leak")
        records = [json.loads(line) for line in files[w.file].decode().splitlines()]
        assert records == list(w.records)
        assert replay_records(records, "newest").leak_records
    agg = advice.open_paths[0].witness
    assert (agg.ranks, agg.iterations) == (2, 2)  # GENERATION_TO_COMPLETE needs a forward first


def test_exploration_agrees_with_the_masks_on_every_path_of_a_slice():
    """Wherever ``path_gap`` reads a gap from the masks, exploring the path (the dummy always
    fitting) finds a witness; wherever it reads none, exploration finds no counterexample."""
    space = ConfigSpace(pp_sizes=(1, 2), overlap=(False,), models=("deepseek_v4",),
                        max_batch_sizes=(2,), dkv=(False,))
    for config in space.configs(tp_size=2):
        for name in ("prefix-2026", "fix-16279", "newest"):
            policy = CATALOGUE[name]
            gap = path_gap(policy, config)
            assert gap.open == (with_evidence(gap, policy, config).witness is not None), (name, config)


def test_the_postmortem_writes_and_names_each_open_path_witness(crash_inputs, tmp_path):
    """The report's open paths name their witness files, the files are in the report directory
    and replay under their build with a leak, and ``findings.json`` lists each witness."""
    r = postmortem(crash_inputs, tmp_path / "report")
    findings = json.loads(r.findings_json.read_text())
    listed = [(a["policy"], p["witness"]["file"]) for a in findings["recommended"]
              for p in a["open_paths"]]
    assert listed and all(file for _, file in listed)
    text = r.report_md.read_text()
    for policy, file in listed:
        assert f"`{file}`" in text
        records = [json.loads(x) for x in (r.out_dir / file).read_text().splitlines()]
        assert replay_records(records, policy).leak_records
    closed = [a["here_evidence"] for a in findings["recommended"] if a["here"] is None]
    assert all(e.startswith("no counterexample in ") for e in closed)
