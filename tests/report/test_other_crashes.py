"""Crashes that are not a pad-dummy leak (a Python traceback, a C++ assertion, NCCL, an MPI
abort, a CUDA error) are exit 3 with the crash named, where it is, and what the tool can and
cannot say; exit 2 stays for input the tool cannot use. The excerpts are written here in the
shape real logs have (see ``../shared/samples/real-logs`` for the originals)."""
from __future__ import annotations

from pathlib import Path

import pytest
from report_scenarios import SHARED

from forensics.pipeline import postmortem
from forensics.signature_kinds import SignatureKind

ITER = ("[11/30/2026-12:00:01] [TRT-LLM] [RANK 1] [I] iter = 41, global_rank = 1, rank = 1, "
        "currank_total_requests = 1/1, host_step_time = 1.0ms, prev_device_step_time = 1.0ms, "
        "timestamp = 2026-11-30 12:00:01, num_scheduled_requests: 1, states = "
        "{'num_ctx_requests': 0, 'num_ctx_tokens': 0, 'num_generation_tokens': 1}\n")
KEY_ERROR = ITER + """\
[11/30/2026-12:00:02] [TRT-LLM] [RANK 1] [E] Traceback (most recent call last):
  File "/opt/lib/tensorrt_llm/executor/proxy.py", line 170, in dispatch_result_task
    process_res(i)
  File "/opt/lib/tensorrt_llm/executor/proxy.py", line 151, in process_res
    queue = self._results[client_id]
KeyError: 3
"""
KV_ASSERT = """\
[TensorRT-LLM][ERROR] Encountered an error in forwardAsync function: [TensorRT-LLM][ERROR] \
Assertion failed: mFreeBlocks.size() > 0 (/build/cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp:412)
1       0x7f00aa01 tensorrt_llm::common::throwRuntimeError(char const*, int, char const*) + 76
2       0x7f00aa02 tensorrt_llm::batch_manager::kv_cache_manager::BlockManager::getFreeBlock(int) + 220
"""
NCCL = """\
[11/30/2026-12:00:05] [TRT-LLM] [RANK 3] [E] Failed to initialize executor on rank 3: \
[TensorRT-LLM][ERROR] Assertion failed: Failed, NCCL error \
/src/cpp/tensorrt_llm/runtime/ncclCommunicator.cpp:90 'unhandled system error'
1       0x7f00bb01 tensorrt_llm::common::throwRuntimeError(char const*, int, char const*) + 76
"""
CUDA = """\
[11/30/2026-12:00:07] [TRT-LLM] [RANK 0] [E] Traceback (most recent call last):
  File "/opt/lib/tensorrt_llm/_torch/pyexecutor/model_engine.py", line 2100, in forward
    torch.cuda.synchronize()
RuntimeError: CUDA error: an illegal memory access was encountered
"""
MPI = """\
--------------------------------------------------------------------------
MPI_ABORT was invoked on rank 2 in communicator MPI_COMM_WORLD
with errorcode 1.
"""


@pytest.mark.parametrize("text, name, location, rank", [
    (KEY_ERROR, "KeyError in process_res", "/opt/lib/tensorrt_llm/executor/proxy.py:151", 1),
    (KV_ASSERT, "C++ assertion failed: mFreeBlocks.size() > 0",
     "/build/cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp:412", None),
    (NCCL, "NCCL error", "/src/cpp/tensorrt_llm/runtime/ncclCommunicator.cpp:90", 3),
    (CUDA, "CUDA error", "/opt/lib/tensorrt_llm/_torch/pyexecutor/model_engine.py:2100", 0),
])
def test_a_crash_outside_the_pad_step_is_exit_3_named_with_its_location(tmp_path, text, name,
                                                                       location, rank):
    log = tmp_path / "rank.log"
    log.write_text(text)
    r = postmortem([log], tmp_path / "r")
    assert r.exit_status == 3
    c = r.log_crash
    assert (c.kind, c.name, c.code_location, c.rank) == (SignatureKind.OTHER_CRASH, name,
                                                         location, rank)
    assert name in r.status_reason and location in r.status_reason
    assert "the tool can say where and when it was logged, not why" in r.status_reason
    # one crash, however many lines print it (message, backtrace, traceback)
    assert [s.kind for s in r.signatures] == [SignatureKind.OTHER_CRASH]


def test_the_iteration_before_a_traceback_dates_it(tmp_path):
    log = tmp_path / "rank1.log"
    log.write_text(KEY_ERROR)
    r = postmortem([log], tmp_path / "r")
    assert (r.log_crash.iter, r.log_crash.iter_inferred, r.log_crash.line) == (41, True, 2)
    assert "after iteration 41" in r.status_reason


def test_an_mpi_abort_alone_is_exit_3(tmp_path):
    log = tmp_path / "mpirun.log"
    log.write_text(MPI)
    r = postmortem([log], tmp_path / "r")
    assert r.exit_status == 3 and r.log_crash.kind is SignatureKind.MPI_ABORT
    assert r.log_crash.rank == 2


def test_a_warning_that_mentions_cuda_is_no_crash(tmp_path):
    log = tmp_path / "rank0.log"
    log.write_text("[11/30/2026-12:00:07] [TRT-LLM] [RANK 0] [W] retrying after CUDA error 700\n"
                   + ITER)
    r = postmortem([log], tmp_path / "r")
    assert r.log_crash is None and r.exit_status == 0


REAL = {  # sample -> (name starts with, exit status)
    "trtllm_issue_2708.txt": ("C++ assertion failed: mNextBlocks.empty()", 3),
    "trtllm_issue_15022.txt": ("C++ assertion failed: value >= 0", 3),
    "trtllm_issue_9263.txt": ("NCCL error", 3),
    "trtllm_pr_3321.txt": ("KeyError in process_res", 3),
    "trtllm_issue_3736.txt": ("mpi-abort", 3),
}


@pytest.mark.parametrize("sample", sorted(REAL))
def test_real_crash_excerpts_are_exit_3_and_named(tmp_path, sample):
    path = SHARED / "samples" / "real-logs" / sample
    if not path.is_file():
        pytest.skip("../shared/samples/real-logs is absent")
    r = postmortem([path], tmp_path / "r")
    name, status = REAL[sample]
    assert r.exit_status == status
    assert r.log_crash is not None and r.log_crash.title.startswith(name)
