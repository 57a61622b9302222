"""Names of the ``events.kind`` values written by the executor-log parser.

Kinds are plain strings in the Parquet file; these constants are the single place they are
spelled. ``line_end > line`` only for the multi-line kinds.

==========================  ========  ======================================================
kind                        lines     what it is (numbers it carries)
==========================  ========  ======================================================
``adp_assert``              multi     the pad-dummy ``AssertionError`` on
                                      ``expected_num_active_requests`` (NVBug 6438685, PR
                                      #16161), full or author-abridged traceback (PR #17278)
``adp_surplus_tolerated``   single    "active_requests (N) exceeds expected_num_active_requests
                                      (M); tolerating ..." (PR #17278): num_active, num_expected
``adp_dummy_alloc_failed``  single    "Cannot allocate ... pad dummy; ... the fleet will retry."
``adp_dummy_no_kv_capacity`` single   "Unable to fit the complete attention-DP dummy KV
                                      allocation; ..." (the KV-capacity precheck, every path
                                      from NVIDIA 000515e), or the post-schedule pad's "... cannot
                                      afford even a padding dummy ..."
``adp_dummy_skipped``       single    "Skipped adding dummy requests: num_fetch_requests=...,
                                      num_schedulable_requests=..."
``kv_transfer_timeout``     single    "... due to KV cache transfer timeout" (request_id if named)
``kv_transfer_error``       single    "Disagg KV cache transfer error: rank=R local_err_count=N"
                                      (error_count; rank from the message if the prefix has none)
``event_loop_error``        single    "Error in event loop: ..." (message = the error text)
``mpi_abort``               multi     Open MPI's MPI_ABORT banner (dashes to dashes)
``version``                 single    ``[TensorRT-LLM] TensorRT-LLM version: X`` (version)
``traceback``               multi     any other Python traceback: exception_type, message,
                                      innermost_file/line/function
``continued``               multi     a later piece of a multi-line event interrupted by another
                                      launcher stream's lines (interleaved ranks), so that line
                                      ranges never overlap; same details as the first piece
``cpp_backtrace``           multi     consecutive numbered C++ frames ``N  0xADDR symbol``
``cpp_log``                 single    a ``[TensorRT-LLM][LEVEL]`` C++ logger line carrying no
                                      known message (severity from LEVEL)
``log``                     single    any other logger-prefixed line (TRT-LLM Python logger,
                                      glog, Python logging, uvicorn) carrying no known message;
                                      kept as an event so severity, rank and time stay queryable
``collector_timestamp``     single    a line holding only a collector's timestamp (log_time)
``cuda_device_assert``      single    a CUDA device-side assert line (ATen kernel): kernel
                                      source in innermost_file/line, kernel in
                                      innermost_function, cuda_block, cuda_thread; message =
                                      the condition (:mod:`failure_messages`)
``nccl_timeout``            single    NCCL watchdog collective timeout: rank, seq_num, op_type,
                                      numel_in, numel_out, timeout_ms, elapsed_ms
``cuda_oom``                single    CUDA out of memory: gpu, requested_bytes, total_bytes,
                                      free_bytes (also a traceback ending in it: multi)
``dist_timeout``            single    torch.distributed store timeout waiting for clients:
                                      timeout_ms, clients_joined, clients_expected
``long_line``               single    a line longer than the reader holds whole (16 MiB): its
                                      first bytes in ``text``, its length in the message
``nul_bytes``               note      NUL bytes removed from a line (``logrotate copytruncate``
                                      leaves a NUL-filled hole); the line itself is still
                                      read as its other rows say; claims no line
``input_truncated``         single    a .gz/.zst input ended early; severity E; its ``line`` is
                                      one past the last line read (no such line exists), the
                                      message names the byte offsets
``input_corrupt``           single    a .gz/.zst input has a corrupt block (or unreadable bytes
                                      after its last member); as ``input_truncated``, the
                                      message names the compressed byte offset
==========================  ========  ======================================================

Lines no kind claims go to ``unparsed`` verbatim.
"""
from __future__ import annotations

ADP_ASSERT = "adp_assert"
ADP_SURPLUS_TOLERATED = "adp_surplus_tolerated"
ADP_DUMMY_ALLOC_FAILED = "adp_dummy_alloc_failed"
ADP_DUMMY_NO_KV_CAPACITY = "adp_dummy_no_kv_capacity"
ADP_DUMMY_SKIPPED = "adp_dummy_skipped"
KV_TRANSFER_TIMEOUT = "kv_transfer_timeout"
KV_TRANSFER_ERROR = "kv_transfer_error"
EVENT_LOOP_ERROR = "event_loop_error"
MPI_ABORT = "mpi_abort"
VERSION = "version"
TRACEBACK = "traceback"
CONTINUED = "continued"
CPP_BACKTRACE = "cpp_backtrace"
CPP_LOG = "cpp_log"
LOG = "log"
COLLECTOR_TIMESTAMP = "collector_timestamp"
INPUT_TRUNCATED = "input_truncated"
CUDA_DEVICE_ASSERT = "cuda_device_assert"
NCCL_TIMEOUT = "nccl_timeout"
CUDA_OOM = "cuda_oom"
DIST_TIMEOUT = "dist_timeout"
LONG_LINE = "long_line"
NUL_BYTES = "nul_bytes"
INPUT_CORRUPT = "input_corrupt"

#: Every kind, for validation and summaries.
ALL = (ADP_ASSERT, ADP_SURPLUS_TOLERATED, ADP_DUMMY_ALLOC_FAILED, ADP_DUMMY_SKIPPED,
       KV_TRANSFER_TIMEOUT, KV_TRANSFER_ERROR, EVENT_LOOP_ERROR, MPI_ABORT, VERSION, TRACEBACK,
       CONTINUED, CPP_BACKTRACE, CPP_LOG, LOG, COLLECTOR_TIMESTAMP, INPUT_TRUNCATED, LONG_LINE,
       NUL_BYTES, CUDA_DEVICE_ASSERT, NCCL_TIMEOUT, CUDA_OOM, DIST_TIMEOUT, INPUT_CORRUPT)
#: Kinds that mark a place and claim no line of the input (outside the line accounting):
#: ``input_truncated`` sits one past the last line, ``nul_bytes`` notes a line another row
#: claims.
NOTES = (INPUT_TRUNCATED, NUL_BYTES)
#: Kinds whose rows may span several lines.
MULTI_LINE = (ADP_ASSERT, MPI_ABORT, TRACEBACK, CONTINUED, CPP_BACKTRACE, CUDA_OOM, NCCL_TIMEOUT,
              DIST_TIMEOUT)
