"""Per (iter, rank) state reconstructed from a dataset: from trace frames, or from logs alone.

- :func:`frame_state`: from request-state trace frames (exact counts, the all-gathered totals,
  ``expected_num_active_requests`` recorded or computed, recorded decisions), the table a
  notebook reads (``Investigation.reconstruction``); which requests are new and the computed
  ``expected`` come from the replay's own rules (``replay.first_seen``,
  ``replay.step.computed_expected``), so the table and the replay cannot disagree.
- :func:`log_state`: from iteration log lines alone (batch size where a rank logs, ``can_queue``
  where it can be known, an explicit unknown where not); the post-mortem's logs-only findings
  (``forensics.logs_only``) are built on it.
"""
from forensics.reconstruct.frame_state import FRAME_STATE_COLUMNS, frame_state
from forensics.reconstruct.log_state import LOG_STATE_COLUMNS, log_state

__all__ = ["FRAME_STATE_COLUMNS", "LOG_STATE_COLUMNS", "frame_state", "log_state"]
