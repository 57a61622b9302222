"""Per (iter, rank) state reconstructed from a dataset: from trace frames, or from logs alone.

- :func:`frame_state`: from request-state trace frames (exact counts, the all-gathered totals,
  ``expected_num_active_requests`` recorded or computed, recorded decisions).
- :func:`log_state`: from iteration log lines alone (batch size where a rank logs, ``can_queue``
  where it can be known, an explicit unknown where not).
"""
from forensics.reconstruct.frame_state import FRAME_STATE_COLUMNS, frame_state
from forensics.reconstruct.log_state import LOG_STATE_COLUMNS, log_state

__all__ = ["FRAME_STATE_COLUMNS", "LOG_STATE_COLUMNS", "frame_state", "log_state"]
