"""IterationStats JSON Lines of a simulated run, with the attention-DP quirks (domain doc §8).

Under ADP rank 0 writes one row per rank per iteration (``attentionDpRank``), but only the
``inflightBatchingStats`` counts are that rank's: ``numActiveRequests``, ``numQueuedRequests``,
``numCompletedRequests`` and ``kvCacheStats`` are rank 0's copy on every row. Dummies are excluded
from ``numContextRequests`` / ``numGenRequests`` / ``numCtxTokens`` but counted in
``numScheduledRequests`` (the batch the rank offered to ``_can_queue``, as in the log's
``num_scheduled_requests``). ``numActiveRequests`` is ``len(active_requests)`` before padding, a
leaked dummy included. The crash body has no row (stats are written at the end of a body).
"""
from __future__ import annotations

import io
import time

from forensics.simulate.run_loop import TOKENS_PER_BLOCK, Body


class StatsWriter:
    """Writes ``stats.jsonl`` body by body.

    Args:
        f: a text stream opened for writing.
        ranks: attention-DP ranks.
        max_num_active_requests: the cap (``maxNumActiveRequests``).
    """

    def __init__(self, f: io.TextIOBase, *, ranks: int, max_num_active_requests: int):
        self.f = f
        self.R = ranks
        self.cap = max_num_active_requests

    def body(self, b: Body) -> None:
        if b.crashed:
            return
        out = b.out
        ts = time.strftime("%m-%d-%Y %H:%M:%S", time.gmtime(int(b.start_s)))
        host = round(b.host_step_ms, 3)
        used = int(b.kv_used_blocks[0])
        common = (f'{{"iter":{b.iter},"timestamp":"{ts}","iterLatencyMS":{host},'
                  f'"numActiveRequests":{int(out.active[0])},"numQueuedRequests":{b.queued},'
                  f'"numCompletedRequests":{int(b.completed[0])},"maxNumActiveRequests":{self.cap},'
                  f'"kvCacheStats":{{"maxNumBlocks":{b.kv_max_blocks},'
                  f'"freeNumBlocks":{b.kv_max_blocks - used},"usedNumBlocks":{used},'
                  f'"tokensPerBlock":{TOKENS_PER_BLOCK}}},')
        tail = f'"hostStepTimeMS":{host}'
        if b.prev_device_step_ms is not None:
            tail += f',"prevDeviceStepTimeMS":{round(b.prev_device_step_ms, 3)}'
        decoded = "1.0" if bool(out.can_queue[0]) else "0.0"
        rows = []
        for r in range(self.R):
            rows.append(
                f'{common}"inflightBatchingStats":{{"numScheduledRequests":{int(out.batch[r])},'
                f'"numContextRequests":{int(b.sched_ctx[r])},"numGenRequests":{int(b.sched_gen[r])},'
                f'"numPausedRequests":0,"numCtxTokens":{int(b.sched_ctx_tokens[r])},'
                f'"microBatchId":0,"avgNumDecodedTokensPerIter":{decoded}}},'
                f'"attentionDpRank":{r},{tail}}}\n')
        self.f.write("".join(rows))

    def close(self) -> None:
        pass
