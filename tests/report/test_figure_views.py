"""The per-iteration load and the busiest iterations a streamed result's figures read, from
decisions that come a row group at a time (hand-worked rows)."""
from __future__ import annotations

import pyarrow as pa

from forensics.report.figure_views import busiest_iterations, stored_per_iteration_active


class RowGroups:
    """A streamed result as the two functions see it: its decisions, batch by batch."""

    def __init__(self, *groups: dict):
        self.groups = groups

    def decision_batches(self, columns):
        for g in self.groups:
            yield pa.RecordBatch.from_pydict({c: pa.array(g[c], pa.int64()) for c in columns})


# Two ranks; iteration 11 straddles the two row groups; the second group is out of order.
ROWS = RowGroups(
    {"iter": [10, 10, 11], "rank": [0, 1, 0], "active": [3, 1, 5]},
    {"iter": [12, 11, 12, 13], "rank": [1, 1, 0, 0], "active": [4, 2, 5, 1]},
)


def test_per_iteration_load_spans_row_groups():
    per = stored_per_iteration_active(ROWS)
    assert per.index.tolist() == [10, 11, 12, 13]
    assert per["max"].tolist() == [3, 5, 5, 1]      # 11: max(5, 2) across the two groups
    assert per["sum"].tolist() == [4, 7, 9, 1]      # 12: 4 + 5


def test_busiest_iteration_is_each_ranks_first_peak():
    # rank 0 holds 5 at iterations 11 (group one) and 12 (group two): the first one counts;
    # rank 1 peaks at 4 in iteration 12
    assert busiest_iterations(ROWS) == {11, 12}
    # a tie inside one group: the earlier row
    tie = RowGroups({"iter": [20, 21, 22], "rank": [0, 0, 0], "active": [2, 7, 7]})
    assert busiest_iterations(tie) == {21}
    # a later group beats an earlier peak only when strictly higher
    later = RowGroups({"iter": [30], "rank": [2], "active": [1]},
                      {"iter": [31, 32], "rank": [2, 2], "active": [1, 6]})
    assert busiest_iterations(later) == {32}


def test_no_rows():
    assert busiest_iterations(RowGroups()) == set()
    assert len(stored_per_iteration_active(RowGroups())) == 0
