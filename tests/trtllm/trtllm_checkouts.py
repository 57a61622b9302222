"""Helpers for the issue #6 tests: fixture sources laid out as TensorRT-LLM checkouts, git repos."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
EXECUTOR = "tensorrt_llm/_torch/pyexecutor/py_executor.py"
SCHEDULER = "tensorrt_llm/_torch/pyexecutor/scheduler/scheduler.py"
#: Fixture file of each era, and the catalogue policies its shape may map to (the catalogue's
#: name for that era first, then the nearest entry of an older catalogue).
ERAS = {
    "2025": ("mid-2025", "legacy-2025"),
    "2026": ("prefix-2026",),
    "fix16161": ("fix-16161",),
    "16921": ("sched-aware-16921",),
    "17278": ("sched-aware-16921", "tolerant-17278"),
    "newest": ("newest",),
}


#: The hand-made trace of test_bisect / test_candidate (worked in test_bisect's docstring).
RUN = {"kind": "run", "format": "adp-trace", "version": 1, "tp_size": 2, "pp_size": 1,
       "max_batch_size": 1, "max_num_active_requests": 1, "disaggregated": True,
       "overlap_scheduler": False, "build": "prefix-2026"}


def _frame(it, rank, reqs):
    return {"kind": "frame", "iter": it, "rank": rank,
            "requests": [{"id": i, "state": s} for i, s in reqs]}


RECORDS = [RUN,
           _frame(0, 0, [(1, "DISAGG_GENERATION_INIT")]),
           _frame(0, 1, [(2, "GENERATION_TO_COMPLETE")]),
           _frame(1, 0, [(1, "DISAGG_GENERATION_TRANS_IN_PROGRESS")]),
           _frame(1, 1, [(2, "GENERATION_TO_COMPLETE")]),
           _frame(2, 0, [(1, "GENERATION_IN_PROGRESS")]), _frame(2, 1, [(3, "CONTEXT_INIT")])]


def place(root: Path, era: str, executor_text: str | None = None) -> Path:
    """Write an era's executor (and the scheduler module) under ``root`` in the checkout layout."""
    ex = root / EXECUTOR
    ex.parent.mkdir(parents=True, exist_ok=True)
    if executor_text is None:
        shutil.copy(FIXTURES / f"py_executor_{era}.py", ex)
    else:
        ex.write_text(executor_text)
    sched = root / SCHEDULER
    sched.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(FIXTURES / "scheduler_16921.py", sched)
    return root


class GitRepo:
    """A throw-away git repository in ``tmp_path`` with a local identity."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q")
        self.git("config", "user.name", "adp-forensics tests")
        self.git("config", "user.email", "tests@example.invalid")
        self.git("config", "commit.gpgsign", "false")

    def git(self, *args: str) -> str:
        return subprocess.run(["git", "-C", str(self.root), *args], check=True,
                              capture_output=True, text=True).stdout.strip()

    def commit(self, message: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")

    def commit_era(self, era: str, message: str) -> str:
        place(self.root, era)
        return self.commit(message)

    def commit_unrelated(self, name: str, text: str) -> str:
        (self.root / name).write_text(text)
        return self.commit(f"unrelated: {name}")


@pytest.fixture
def git_repo(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    return GitRepo(tmp_path / "TensorRT-LLM")


ERA_TREES = FIXTURES / "eras"
#: The §10 era fixture trees (``fixtures/eras/*``), oldest first, and the era label
#: ``replay.era.detect_era`` must read off each.
ERA_FIXTURES = {
    "mid-2025": "mid-2025",
    "late-2025": "late-2025",
    "early-2026": "early-2026",
    "prefix-2026": "prefix-2026",
    "16279": "16279",
    "000515e": "after-16279",
    "002f3cc": "after-16921",
    "0004396": "newest",
    "dkv": "dkv",
    "fork-ingestion-task": "newest",
}

#: The catalogue entry each era fixture models: ``identify`` names it, and ``identify --explore``
#: finds it agreeing on every schedule of the default bound and names it
#: (``benchmarks/explore_eras.py``, ``test_explore_differential``).
ERA_ENTRIES = {
    "mid-2025": "mid-2025",
    "late-2025": "legacy-2025",
    "early-2026": "early-2026",
    "prefix-2026": "prefix-2026",
    "16279": "fix-16279",
    "000515e": "tolerant-17278",
    "002f3cc": "postpad-17379",
    "0004396": "newest",
    "dkv": "dkv",
    "fork-ingestion-task": "newest",
}


#: Files several era trees share (same text in those eras), added by :func:`place_era`:
#: the ADP router of 2026 without and with the cap, and the PR #16921 scheduler module.
ROUTER = "scheduler/adp_router.py"
#: The disaggregation coordinator (#18595 on), beside ``pyexecutor/`` in the checkout.
COORDINATOR = "../disaggregation/orchestration/coordinator.py"
SHARED = {
    "early-2026": {ROUTER: "adp_router_uncapped.py"},
    **{era: {ROUTER: "adp_router_capped.py"} for era in ("prefix-2026", "16279", "000515e")},
    **{era: {ROUTER: "adp_router_capped.py", "scheduler/scheduler.py": "scheduler_16921.py"}
       for era in ("002f3cc", "fork-ingestion-task")},
    **{era: {ROUTER: "adp_router_capped.py", "scheduler/scheduler.py": "scheduler_16921.py",
             COORDINATOR: "disagg_coordinator.py"} for era in ("0004396", "dkv")},
}


def place_era(root: Path, era: str) -> Path:
    """Lay the era's fixture tree (``fixtures/eras/ERA`` plus its :data:`SHARED` files) out in
    ``root`` as a TensorRT-LLM checkout."""
    target = root / "tensorrt_llm/_torch/pyexecutor"
    shutil.copytree(ERA_TREES / era, target, dirs_exist_ok=True)
    for rel, fixture in SHARED.get(era, {}).items():
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(FIXTURES / fixture, target / rel)
    return root
