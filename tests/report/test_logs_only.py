"""What logs alone establish: batch sizes, fleet skips, dummy tokens, what is missing."""
from __future__ import annotations

import pandas as pd

from forensics.logs_only import MAX_LISTED_SKIPS, log_decisions, logs_only_findings


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


# --- the findings without the (iteration x rank) grid equal the grid's ---------------------------

def _grid_findings(iterations, fleet):
    """The findings' iteration part as the grid of ``log_decisions`` gives it (the construction
    ``logs_only_findings`` used before aggregating per iteration): a reference."""
    dec = log_decisions(iterations, fleet)
    if not len(dec):
        return (), 0, 0, 0, 0, [], False, {}, []
    b = dec["batch"]
    per = pd.DataFrame({"iter": dec["iter"], "logged": b.notna(), "zero": (b == 0).fillna(False),
                        "busy": (b > 0).fillna(False)}).groupby("iter").agg(
        rows=("logged", "size"), logged=("logged", "sum"), zero=("zero", "sum"), busy=("busy", "sum"))
    known = (per["logged"] == per["rows"]) & (per["logged"] >= (fleet or 0))
    skip_iters = per.index[(per["zero"] > 0) & (per["busy"] > 0)]
    skips = []
    for i, g in dec[dec["iter"].isin(skip_iters[:MAX_LISTED_SKIPS])].groupby("iter", sort=True):
        gb = g["batch"]
        skips.append((int(i), tuple(int(r) for r in g.loc[(gb == 0).fillna(False), "rank"]),
                      tuple(int(r) for r in g.loc[(gb > 0).fillna(False), "rank"])))
    ranks = tuple(sorted(int(r) for r in dec.loc[b.notna(), "rank"].unique()))
    logged, forwarded, after = False, {}, []
    if dec["padded"].notna().any():
        logged = True
        fw = dec[dec["padded"].fillna(False).astype(bool)]
        forwarded = {int(r): int(n) for r, n in fw.groupby("rank").size().items()}
        busy = {(i, r) for i, _, rs in skips for r in rs}
        after = sorted((int(i), int(r)) for i, r in zip(fw["iter"], fw["rank"]) if (int(i) - 1, int(r)) in busy)
    return (ranks, int(known.sum()), int((~known).sum()), len(skip_iters),
            int(((per["zero"] > 0) & (per["busy"] == 0) & known).sum()), skips, logged, forwarded, after)


def _findings_part(f):
    return (f.ranks_logging, f.iterations_all_known, f.iterations_unknown, f.fleet_skip_count,
            f.idle_iterations, [(s.iter, s.zero_ranks, s.busy_ranks) for s in f.fleet_skips],
            f.dummy_tokens_logged, f.dummy_forwarded, list(f.dummy_forwarded_in_skips))


def _random_lines(seed, n_iters=400, ranks=4):
    """Lines of a few ranks, some missing, some logged twice, V5 tokens on some, a rank out of
    range and lines with no batch."""
    import numpy as np
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(1, n_iters):
        for r in range(ranks + 1):          # rank ``ranks`` is outside a fleet of ``ranks``
            if rng.random() < 0.3:
                continue
            batch = None if rng.random() < 0.05 else int(rng.integers(0, 3))
            rows.append((r, i, batch, None if rng.random() < 0.2 else int(rng.integers(0, 2))))
            if rng.random() < 0.05:          # logged twice (a restart), other values
                rows.append((r, i, int(rng.integers(0, 3)), int(rng.integers(0, 2))))
    return iterations(rows)


def test_findings_equal_the_grid_construction():
    import pathlib

    from forensics.readers.dataset_cache import as_dataset

    cases = [(_random_lines(seed), fleet) for seed in (1, 2) for fleet in (None, 4, 6)]
    no_tokens = _random_lines(3).drop(columns=["adp_dummy_ctx_tokens", "adp_dummy_gen_tokens"])
    cases.append((no_tokens, 4))
    local = _random_lines(4)
    local["local_rank"] = local["rank"]
    local.loc[local.index % 3 == 0, "rank"] = pd.NA   # rank from local_rank where missing
    cases.append((local, 5))
    samples = pathlib.Path(__file__).resolve().parents[2] / "traces" / "samples"
    for d in sorted(samples.glob("*/executor.log")):
        cases.append((as_dataset([d]).iterations, None))
    assert len(cases) >= 10
    for it, fleet in cases:
        f = logs_only_findings(it, pd.DataFrame(columns=["rank", "kind"]), tp_size=fleet)
        assert _findings_part(f) == _grid_findings(it, f.fleet_size)
    assert any(_findings_part(logs_only_findings(it, pd.DataFrame(columns=["rank", "kind"]),
                                                 tp_size=fl))[3] for it, fl in cases)
