"""The ``stats`` table's typed columns and the batch a stats reader yields: one definition that
the reference reader (``stats_json``) and the compiled scanner (``json_scan``) share."""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

#: dotted IterationStats key -> typed ``stats`` column. These keys are not repeated in ``fields``.
TYPED_COLUMNS: dict[str, str] = {
    "iter": "iter",
    "attentionDpRank": "rank",
    "numActiveRequests": "num_active_requests",
    "numQueuedRequests": "num_queued_requests",
    "numCompletedRequests": "num_completed_requests",
    "maxNumActiveRequests": "max_num_active_requests",
    "inflightBatchingStats.numContextRequests": "num_context_requests",
    "inflightBatchingStats.numGenRequests": "num_gen_requests",
    "inflightBatchingStats.numScheduledRequests": "num_scheduled_requests",
    "inflightBatchingStats.numPausedRequests": "num_paused_requests",
    "inflightBatchingStats.numCtxTokens": "num_ctx_tokens",
    "iterLatencyMS": "iter_latency_ms",
    "hostStepTimeMS": "host_step_time_ms",
    "prevDeviceStepTimeMS": "prev_device_step_time_ms",
}
#: Typed columns of float type (the others are integers).
#: The top-level keys of TensorRT-LLM's ``IterationStats`` (its JSON, camelCase) and of the
#: PyTorch executor's additions: JSON whose first object carries none of them is not read as
#: stats (:func:`forensics.readers.kinds.detect_kind`).
ITERATION_STATS_KEYS = frozenset({
    "timestamp", "iter", "iterLatencyMS", "newActiveRequestsQueueLatencyMS",
    "numNewActiveRequests", "numActiveRequests", "numQueuedRequests", "numCompletedRequests",
    "maxNumActiveRequests", "maxBatchSizeStatic", "maxBatchSizeTunerRecommended",
    "maxBatchSizeRuntime", "maxNumTokensStatic", "maxNumTokensTunerRecommended",
    "maxNumTokensRuntime", "gpuMemUsage", "cpuMemUsage", "pinnedMemUsage", "kvCacheStats",
    "crossKvCacheStats", "staticBatchingStats", "inflightBatchingStats", "specDecodingStats",
    "attentionDpRank", "hostStepTimeMS", "prevDeviceStepTimeMS"})
FLOAT_COLUMNS = frozenset({"iter_latency_ms", "host_step_time_ms", "prev_device_step_time_ms"})
#: Integer columns narrower than int64: the largest value they hold.
INT_BOUNDS = {"rank": 2**31 - 1}


@dataclass(frozen=True)
class StatsBatch:
    """Rows read from one stats file, in the dataset schemas.

    Attributes:
        stats: rows of the ``stats`` table.
        events: rows of the ``events`` table (only ``input_truncated``).
        unparsed: rows of the ``unparsed`` table.
    """

    stats: pa.Table
    events: pa.Table
    unparsed: pa.Table


__all__ = ["FLOAT_COLUMNS", "INT_BOUNDS", "ITERATION_STATS_KEYS", "TYPED_COLUMNS", "StatsBatch"]
