"""Replaying real-code policies end to end, and ``bisect`` over a planted history (issue #6).

The trace (two ranks, ``max_batch_size`` 1 so the cap is 1, disaggregated, non-overlap):

    iter  rank 0                               rank 1
    0     [1 DISAGG_GENERATION_INIT]           [2 GENERATION_TO_COMPLETE]
    1     [1 DISAGG_GENERATION_TRANS_IN_PROG]  [2 GENERATION_TO_COMPLETE]
    2     [1 GENERATION_IN_PROGRESS]           [3 CONTEXT_INIT]

Before the fix (legacy count): iter 0, rank 0 counts 0 and pads; rank 1 counts its TO_COMPLETE
request (1) and does not pad, but the scheduler gives it 0, so can_queue is False and rank 0's
dummy survives: one leak (rank 0, created 0, skipped 0). At iter 1 rank 0 holds 1 + 1 dummy = 2;
expected = min(max(ceil(3 / 2), 2), cap 1) = 1 < 2: the 2026 build asserts there (rank 0, iter 1),
the 2025 build has no cap (expected 2) and goes on. With the window fix rank 1 pads too at iters
0 and 1, both batches are 1, can_queue holds and every dummy is removed: no leak, no crash.
"""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from trtllm_checkouts import ERAS, RECORDS, place

from forensics.errors import PolicyError
from replay.bisect import bisect, watched_commits
from replay.walk import run
from replay.frames import RunFrames
from replay.resolve import resolve_policy
from replay.trtllm_source import era_of

#: Hand-worked verdicts (module docstring): leaks as (rank, created, skipped), crash (iter, rank).
EXPECTED = {
    "mid-2025": ([(0, 0, 0)], None),
    "legacy-2025": ([(0, 0, 0)], None),
    "prefix-2026": ([(0, 0, 0)], (1, 0)),
    "fix-16161": ([], None),
    "sched-aware-16921": ([], None),
    "tolerant-17278": ([], None),
    "postpad-17379": ([], None),
    "newest": ([], None),
}


@pytest.fixture(scope="module")
def frames():
    return RunFrames.from_records(RECORDS)


def _verdict(result):
    leaks = [(l.rank, l.iter_created, l.iter_skipped) for l in result.leak_records]
    crash = None if result.crash is None else (result.crash.iter, result.crash.rank)
    return leaks, crash


@pytest.mark.parametrize("era", list(ERAS))
def test_real_code_replay_matches_its_catalogue_policy(frames, git_repo, era):
    """Each era committed, then replaced in the working tree: ``@sha`` reads the committed one."""
    sha = git_repo.commit_era(era, f"{era} executor")
    place(git_repo.root, "17278" if era != "17278" else "2025")
    policy = resolve_policy(f"trtllm:{git_repo.root}@{sha}")
    loop = era_of(policy)
    assert loop in ERAS[era] and f"[era: {loop}]" in policy.source
    real = run(frames, None, policy)
    model = run(frames, None, loop)
    assert _verdict(real) == _verdict(model) == EXPECTED[loop]


def _history(repo):
    """good (2026) → unrelated → 2025-shaped refactor (still leaks) → unrelated → FIX
    → unrelated → 16921 → 17278 → unrelated (bad). Returns the named commits."""
    c = {"good": repo.commit_era("2026", "pre-fix executor")}
    repo.commit_unrelated("README.md", "docs\n")
    c["refactor"] = repo.commit_era("2025", "executor refactor (same legacy count)")
    repo.commit_unrelated("setup.cfg", "[metadata]\n")
    c["fix"] = repo.commit_era("fix16161", "align the pad predicate with the scheduler window")
    repo.commit_unrelated("CHANGELOG.md", "fix\n")
    c["16921"] = repo.commit_era("16921", "scheduler-aware predicate")
    c["17278"] = repo.commit_era("17278", "tolerate a surplus")
    c["bad"] = repo.commit_unrelated("NOTICE", "n\n")
    return c


def test_bisect_finds_the_planted_fix_walking_only_watched_commits(frames, git_repo):
    c = _history(git_repo)
    assert watched_commits(git_repo.root, c["good"], c["bad"]) == [
        c["refactor"], c["fix"], c["16921"], c["17278"]]
    result = bisect(frames, git_repo.root, c["good"], c["bad"])
    assert result.good_verdict.bad and not result.bad_verdict.bad
    assert result.first_change is not None
    assert result.first_change.revision == c["fix"]
    assert result.direction == "stops leaking"
    assert result.first_change.era == "fix-16161"
    tested = {v.revision for v in result.tested}
    unrelated = set(git_repo.git("rev-list", "HEAD").split()) - set(c.values())
    assert not tested & unrelated - {c["bad"]}
    assert len(result.tested) <= 4  # good, bad and at most two of the four watched commits
    assert "align the pad predicate" in "\n".join(result.summary())


def test_bisect_finds_a_regression(frames, git_repo):
    good = git_repo.commit_era("17278", "tolerant build")
    git_repo.commit_unrelated("README.md", "x\n")
    git_repo.commit_era("16921", "older-looking but still fixed")
    regression = git_repo.commit_era("2026", "revert the window predicate")
    bad = git_repo.commit_unrelated("NOTES", "y\n")
    result = bisect(frames, git_repo.root, good, bad)
    assert (result.first_change.revision, result.direction) == (regression, "starts leaking")
    assert result.first_change.crash is not None  # the 2026 build also asserts on this trace


def test_a_commit_adding_the_cap_in_the_router_is_walked(frames, git_repo):
    """2025 shape (leaks, no crash) → cap added in the request queue only (asserts at iter 1)."""
    good = git_repo.commit_era("2025", "2025 executor")
    git_repo.commit_unrelated("README.md", "x\n")
    queue = git_repo.root / "tensorrt_llm/_torch/pyexecutor/executor_request_queue.py"
    queue.write_text("def expected_num_active_requests(counts, new, tp, max_num_active_requests):\n"
                     "    fair = -(-(sum(counts) + new) // tp)\n"
                     "    return min(max(fair, max(counts)), max_num_active_requests)\n")
    cap = git_repo.commit("cap expected at max_num_active_requests")
    bad = git_repo.commit_unrelated("NOTES", "y\n")
    assert watched_commits(git_repo.root, good, bad) == [cap]
    result = bisect(frames, git_repo.root, good, bad)
    # Both endpoints leak, so the leak verdict does not change: nothing to bisect ...
    assert result.first_change is None
    assert (result.good_verdict.crash, result.bad_verdict.era) == (None, "prefix-2026")
    assert result.bad_verdict.crash is not None  # ... though the capped build also asserts


def test_bisect_with_no_change_reports_nothing(frames, git_repo):
    good = git_repo.commit_era("fix16161", "fixed")
    bad = git_repo.commit_era("17278", "still fixed")
    result = bisect(frames, git_repo.root, good, bad)
    assert result.first_change is None and result.direction is None
    assert "nothing to bisect" in result.summary()[-1]


def test_bisect_skips_revisions_it_cannot_replay(frames, git_repo):
    good = git_repo.commit_era("2026", "pre-fix")
    place(git_repo.root, "2026", executor_text="class PyExecutor:\n    pass\n")
    broken = git_repo.commit("work in progress: pad method moved")
    fix = git_repo.commit_era("fix16161", "fix")
    bad = git_repo.commit_era("17278", "tolerant")
    result = bisect(frames, git_repo.root, good, bad)
    assert result.first_change.revision == fix
    skipped = [v for v in result.tested if v.error is not None]
    assert [v.revision for v in skipped] in ([], [broken])
    assert all("no _pad_attention_dp_dummy_request" in v.error for v in skipped)
    assert result.ambiguous == tuple(v.revision for v in skipped)


def test_bisect_refuses_reversed_endpoints(frames, git_repo):
    a = git_repo.commit_era("2026", "a")
    b = git_repo.commit_era("fix16161", "b")
    with pytest.raises(PolicyError, match="not an ancestor"):
        bisect(frames, git_repo.root, b, a)


def test_cli_bisect(tmp_path, git_repo):
    from forensics.cli import cli
    c = _history(git_repo)
    trace = tmp_path / "run.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    res = CliRunner().invoke(cli, ["bisect", str(trace), "--repo", str(git_repo.root),
                                   "--good", c["good"], "--bad", c["bad"], "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["first_change"]["revision"] == c["fix"]
    assert out["direction"] == "stops leaking"
    res = CliRunner().invoke(cli, ["bisect", str(trace), "--repo", str(git_repo.root),
                                   "--good", "nope", "--bad", c["bad"]])
    assert res.exit_code == 2 and "unknown git revision 'nope'" in res.output


def test_cli_replay_accepts_real_code_policies(tmp_path, git_repo):
    """``forensics replay --policy trtllm:REPO@REV`` goes through the same resolver."""
    from forensics.cli import cli
    old = git_repo.commit_era("2026", "pre-fix")
    place(git_repo.root, "fix16161")
    trace = tmp_path / "run.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    at_rev, tree = f"trtllm:{git_repo.root}@{old}", f"trtllm:{git_repo.root}"
    res = CliRunner().invoke(cli, ["replay", str(trace), "--policy", at_rev, "--policy", tree,
                                   "--json"])
    assert res.exit_code == 1, res.output  # one chosen policy crashes
    out = json.loads(res.output)["policies"]
    assert [(l["rank"], l["iter_created"]) for l in out[at_rev]["leaks"]] == [(0, 0)]
    assert (out[at_rev]["crash"]["iter"], out[at_rev]["crash"]["rank"]) == (1, 0)
    assert {k: out[tree][k] for k in ("leaks", "crash", "skipped_iters", "first_divergence")} \
        == {"leaks": [], "crash": None, "skipped_iters": [], "first_divergence": None}
