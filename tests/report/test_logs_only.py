"""What logs alone establish: batch sizes, fleet skips, dummy tokens, what is missing."""
from __future__ import annotations

import pandas as pd

from forensics.report.logs_only import log_decisions, logs_only_findings


def iterations(rows):
    """rows: (rank, line iter, num_scheduled_requests, adp_dummy_gen_tokens)."""
    return pd.DataFrame({
        "source": "a.log", "line": range(len(rows)),
        "rank": pd.array([r[0] for r in rows], dtype="Int32"),
        "iter": pd.array([r[1] for r in rows], dtype="Int64"),
        "num_scheduled_requests": pd.array([r[2] for r in rows], dtype="Int32"),
        "adp_dummy_ctx_tokens": pd.array([0] * len(rows), dtype="Int64"),
        "adp_dummy_gen_tokens": pd.array([r[3] for r in rows], dtype="Int64"),
    })


def test_skips_where_every_rank_logs():
    """Two ranks, V5 lines. Line iter = executor iter + 1 (domain doc §8):

        line iter  rank 0 batch/tokens  rank 1 batch/tokens   executor iter  can_queue
        5          1 / 0                1 / 0                 4              True
        6          1 / 1 (dummy)        0 / 0                 5              False (rank 1 zero)
        7          2 / 1 (dummy)        --                    6              unknown
    The dummy rank 0 forwards at executor iter 6 follows its skip at 5: it likely survived it.
    """
    it = iterations([(0, 5, 1, 0), (1, 5, 1, 0), (0, 6, 1, 1), (1, 6, 0, 0), (0, 7, 2, 1)])
    dec = log_decisions(it, fleet_size=2)
    assert dec["iter"].tolist() == [4, 4, 5, 5, 6, 6]
    assert dec["can_queue"].tolist()[:4] == [True, True, False, False]
    assert dec["can_queue"].isna().tolist()[4:] == [True, True]
    f = logs_only_findings(it, pd.DataFrame(columns=["rank", "kind"]))
    assert f.fleet_size == 2 and not f.fleet_size_known
    assert [(s.iter, s.zero_ranks, s.busy_ranks) for s in f.fleet_skips] == [(5, (1,), (0,))]
    assert f.iterations_all_known == 2 and f.iterations_unknown == 1
    assert f.dummy_forwarded == {0: 2}
    assert f.dummy_forwarded_in_skips == ((6, 0),)
    assert any("ADP_FORENSICS_TRACE_DIR" in m for m in f.missing)
    assert not any("TLLM_PROFILE_LOG_RANKS" in m for m in f.missing)  # both ranks log


def test_only_rank0_logs_says_what_to_record():
    it = iterations([(0, 1, 1, 0), (0, 2, 1, 0)])
    ev = pd.DataFrame({"rank": pd.array([0, 3], dtype="Int32"),
                       "kind": ["adp_surplus_tolerated", "kv_transfer_timeout"],
                       "num_active": [9, None], "num_expected": [8, None]})
    f = logs_only_findings(it, ev)
    assert f.fleet_size == 4 and f.ranks_logging == (0,)
    assert f.iterations_all_known == 0 and f.iterations_unknown == 2
    assert f.surplus_warnings == 1 and f.max_surplus == 1 and f.kv_transfer_problems == 1
    assert any("TLLM_PROFILE_LOG_RANKS=all" in m for m in f.missing)
    text = " ".join(f.conclusions())
    assert "surplus" in text and "unknown" in text
