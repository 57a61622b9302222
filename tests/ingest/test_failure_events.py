"""CUDA and torch.distributed failures as typed events with their numbers (issue 13 item 4).
Lines are written here in the shapes PyTorch and NCCL print them."""
from __future__ import annotations

from .test_log_shapes import PRE, load, records

ASSERT = ("/pytorch/aten/src/ATen/native/cuda/TensorCompare.cu:112: _assert_async_cuda_kernel: "
          "block: [0,0,0], thread: [{t},0,0] Assertion `probability tensor contains either `inf`, "
          "`nan` or element < 0` failed.")
WATCHDOG = ("[rank3]:[E1218 20:27:21.426415540 ProcessGroupNCCL.cpp:629] [Rank 3] Watchdog caught "
            "collective operation timeout: WorkNCCL(SeqNum=64214, OpType=ALLGATHER, NumelIn=1, "
            "NumelOut=32, Timeout(ms)=600000) ran for 600081 milliseconds before timing out.")
OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total "
       "capacity of 79.15 GiB of which 1.50 GiB is free. Including non-PyTorch memory, this "
       "process has 77.64 GiB memory in use.")
OOM_OLD = ("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 79.35 GiB total "
           "capacity; 77.50 GiB already allocated; 5.00 MiB free; 78.00 GiB reserved in total by "
           "PyTorch)")
STORE = ("torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. "
         "1/2 clients joined.")
GiB, MiB = 1 << 30, 1 << 20


def test_cuda_device_side_asserts(tmp_path):
    ds = load(tmp_path, ASSERT.format(t=0) + "\n" + ASSERT.format(t=1) + "\n")
    assert records(ds.events, "kind", "line", "innermost_file", "innermost_line",
                   "innermost_function", "cuda_block", "cuda_thread", "severity") == [
        ("cuda_device_assert", k + 1, "/pytorch/aten/src/ATen/native/cuda/TensorCompare.cu", 112,
         "_assert_async_cuda_kernel", "0,0,0", f"{k},0,0", "E") for k in (0, 1)]
    assert ds.events.message[0].startswith("probability tensor contains")
    assert ds.events.text[0] == ASSERT.format(t=0)


def test_nccl_watchdog_timeout(tmp_path):
    ds = load(tmp_path, WATCHDOG + "\n")
    assert records(ds.events, "kind", "rank", "seq_num", "op_type", "numel_in", "numel_out",
                   "timeout_ms", "elapsed_ms") == [
        ("nccl_timeout", 3, 64214, "ALLGATHER", 1, 32, 600000, 600081)]


def test_cuda_out_of_memory_both_forms_logged_and_ending_a_traceback(tmp_path):
    text = "\n".join([
        PRE.replace("[I]", "[E]") + OOM,
        "Traceback (most recent call last):",
        '  File "/x/tensorrt_llm/_torch/pyexecutor/py_executor.py", line 2133, in _forward_step',
        "    outputs = self.model_engine.forward(batch)",
        OOM_OLD]) + "\n"
    ds = load(tmp_path, text)
    ev = ds.events.sort_values("line")
    assert records(ev, "kind", "line", "line_end", "gpu", "requested_bytes", "total_bytes",
                   "free_bytes") == [
        ("cuda_oom", 1, 1, 1, 2 * GiB, int(79.15 * GiB), int(1.5 * GiB)),
        ("cuda_oom", 2, 5, 0, 20 * MiB, int(79.35 * GiB), 5 * MiB)]
    tb = ev.iloc[1]
    assert (tb.exception_type, tb.executor_function) == ("RuntimeError", "_forward_step")
    assert len(ds.traceback_frames) == 1


def test_torch_distributed_store_timeout(tmp_path):
    ds = load(tmp_path, STORE + "\n")
    assert records(ds.events, "kind", "timeout_ms", "clients_joined", "clients_expected") == [
        ("dist_timeout", 901_000, 1, 2)]


def test_failure_numbers_too_large_stay_in_text(tmp_path):
    line = WATCHDOG.replace("SeqNum=64214", "SeqNum=" + "9" * 30)
    ds = load(tmp_path, line + "\n")
    assert records(ds.events, "kind", "seq_num", "timeout_ms") == [("nccl_timeout", None, 600000)]
    assert "9" * 30 in ds.events.text[0]
