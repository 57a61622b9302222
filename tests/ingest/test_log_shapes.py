"""Log lines as real log stacks deliver them (issue 13 items 2 and 3): verbatim event text,
indented and wrapped lines, collector exports (tab-separated timestamps, ``kubectl logs
--timestamps``, journald short-iso, Docker json-file) and launcher prefixes (``srun -l``,
pdsh). Lines are written here in each documented shape; datasets are read through
``forensics.load`` only."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import forensics

from .test_line_accounting import assert_accounted

PRE = "[12/04/2025-22:23:18] [TRT-LLM] [RANK 0] [I] "
ITER = ("iter = 12, global_rank = 0, rank = 0, currank_total_requests = 2/9, "
        "host_step_time = 1.5ms, prev_device_step_time = 1.25ms, timestamp = 2025-12-04 22:23:18")


def load(tmp_path: Path, text: str, name: str = "x.log", kind: str | None = None, **kw):
    p = tmp_path / name
    p.write_text(text)
    n = text.count("\n")
    for block in (64, 1 << 20):     # the same rows whatever the block boundaries
        assert_accounted(p, n, block_bytes=block, **kw)
    forensics.ingest([p], tmp_path / "ds", kind=kind)
    return forensics.load(tmp_path / "ds")


def records(df, *cols):
    """Rows as tuples of plain values (nulls as None)."""
    import pandas as pd
    return [tuple(None if pd.isna(v) else v for v in r)
            for r in df[list(cols)].itertuples(index=False)]


def test_every_event_keeps_its_text_as_printed(tmp_path):
    text = ("[12/04/2025-22:23:18] [TRT-LLM] [RANK 1] [E] Error in event loop: CUDA error: "
            "an illegal memory access was encountered\n"
            "py_executor.py  _pad_attention_dp_dummy_request\n"
            "    assert self.expected_num_active_requests >= len(self.active_requests)\n")
    ds = load(tmp_path, text)
    ev = ds.events
    loop = ev[ev.kind == "event_loop_error"].iloc[0]
    assert loop.message == "CUDA error: an illegal memory access was encountered"
    assert loop.text.startswith("Error in event loop: CUDA error")
    assert ev.text.str.contains("Error in event loop").sum() == 1
    adp = ev[ev.kind == "adp_assert"].iloc[0]
    assert "assert self.expected_num_active_requests" in adp.text


def test_an_indented_cpp_warning_and_its_wrapped_lines_are_one_event(tmp_path):
    text = ("  [TensorRT-LLM][WARNING] CacheTransceiver: the KV cache of request 17 is not\n"
            "  ready after 60000 ms; the transfer will be retried with the next\n"
            "  iteration of the executor loop\n"
            + PRE + ITER + "\n")
    ds = load(tmp_path, text)
    assert records(ds.events, "kind", "line", "line_end", "severity") == [("cpp_log", 1, 3, "W")]
    assert ds.events.text[0].splitlines()[0] == "CacheTransceiver: the KV cache of request 17 is not"
    assert ds.events.text[0].endswith("iteration of the executor loop")
    assert ds.iterations["line"].tolist() == [4] and len(ds.unparsed) == 0


def test_a_message_wrapped_before_a_cpp_backtrace(tmp_path):
    text = ("[11/18/2025-09:33:30] [TRT-LLM] [RANK 0] [E] Failed to initialize executor on rank 0: "
            "[TensorRT-LLM][ERROR] Assertion failed: Failed, NCCL error x.cpp:90 'invalid usage'\n"
            " (../tensorrt_llm/runtime/ncclCommunicator.cpp:90)\n"
            "1       0x7a14a782a0f4 tensorrt_llm::common::throwRuntimeError(char const*) + 76\n"
            "2       0x7a14577171ec tensorrt_llm::runtime::NcclCommunicator::createComm() + 316\n")
    ds = load(tmp_path, text)
    assert records(ds.events, "kind", "line", "line_end", "rank") == [
        ("log", 1, 2, 0), ("cpp_backtrace", 3, 4, 0)]   # (rank: the last one seen)


def test_an_unindented_line_after_a_log_line_stays_unparsed(tmp_path):
    ds = load(tmp_path, PRE + "hello\nsome stray output\n")
    assert records(ds.events, "kind", "line", "line_end") == [("log", 1, 1)]
    assert ds.unparsed.text.tolist() == ["some stray output"]


def test_an_indented_code_block_parses_as_unindented(tmp_path):
    text = "    " + PRE + ITER + "\n    [TensorRT-LLM][ERROR] boom\n"
    ds = load(tmp_path, text)
    assert ds.iterations["iter"].tolist() == [12]
    assert records(ds.events, "kind", "severity", "message") == [("cpp_log", "E", "boom")]


def test_tab_separated_timestamp_lines_date_the_next_line(tmp_path):
    text = ("\t2025-12-04 22:23:18.869\t\n" + PRE + ITER + "\n"
            "\t2025-12-04 22:23:18.870\t\n" + PRE + "hello\n"
            "2025-12-04 22:23:18.871\t" + PRE + "same line\n")
    ds = load(tmp_path, text)
    assert records(ds.iterations, "line", "collector_time") == [(2, "2025-12-04 22:23:18.869")]
    ev = ds.events
    assert records(ev, "kind", "line", "collector", "collector_time") == [
        ("collector_timestamp", 1, "tab", "2025-12-04 22:23:18.869"),
        ("collector_timestamp", 3, "tab", "2025-12-04 22:23:18.870"),
        ("log", 4, None, "2025-12-04 22:23:18.870"),
        ("log", 5, "tab", "2025-12-04 22:23:18.871")]
    assert len(ds.unparsed) == 0


@pytest.mark.parametrize("stamp,collector,ctime", [
    ("2025-12-04T22:23:18.869123456Z ", "kubectl", "2025-12-04T22:23:18.869123456Z"),
    ("2025-12-04T22:23:18+00:00 ", "kubectl", "2025-12-04T22:23:18+00:00"),
    ("2025-12-04T22:23:18+0000 gpu-node-3 python3[4242]: ", "journald", "2025-12-04T22:23:18+0000"),
    ("2025-12-04T22:23:18.123456+0100 gpu-node-3 trtllm-serve[7]: ", "journald",
     "2025-12-04T22:23:18.123456+0100"),
])
def test_collector_time_prefixes(tmp_path, stamp, collector, ctime):
    text = (stamp + PRE + ITER + "\n" + stamp + "[TensorRT-LLM][WARNING] w\n"
            + stamp + "Traceback (most recent call last):\n"
            + stamp + '  File "/x/tensorrt_llm/a.py", line 3, in f\n'
            + stamp + "ValueError: v\n")
    ds = load(tmp_path, text)
    assert records(ds.iterations, "iter", "collector", "collector_time") == [(12, collector, ctime)]
    assert records(ds.events, "kind", "line", "line_end", "collector") == [
        ("cpp_log", 2, 2, collector), ("traceback", 3, 5, collector)]
    assert ds.events.exception_type[1] == "ValueError"


def test_docker_json_file_lines_are_unwrapped_and_parsed(tmp_path):
    lines = [PRE + ITER, "[TensorRT-LLM][WARNING] w", "Traceback (most recent call last):",
             '  File "/x/tensorrt_llm/a.py", line 3, in f', "ValueError: v"]
    text = "".join(json.dumps({"log": ln + "\n", "stream": "stderr",
                               "time": f"2025-12-04T22:23:18.00000000{i}Z"}) + "\n"
                   for i, ln in enumerate(lines))
    ds = load(tmp_path, text, name="container-json.log")   # kind sniffed: log, not stats
    assert ds.meta["inputs"][0]["kind"] == "log"
    assert records(ds.iterations, "iter", "collector", "collector_time") == [
        (12, "docker", "2025-12-04T22:23:18.000000000Z")]
    assert records(ds.events, "kind", "line", "line_end") == [("cpp_log", 2, 2),
                                                              ("traceback", 3, 5)]
    assert (ds.events.collector == "docker").all()


def test_srun_and_pdsh_prefixes_keep_ranks_and_hosts_apart(tmp_path):
    text = ("node07: Traceback (most recent call last):\n"
            "node08: Traceback (most recent call last):\n"
            'node07:   File "/x/tensorrt_llm/a.py", line 3, in f\n'
            'node08:   File "/x/tensorrt_llm/b.py", line 4, in g\n'
            "node07: ValueError: seven\n"
            "node08: KeyError: eight\n"
            "1: " + PRE.replace("RANK 0", "RANK 1") + ITER.replace("global_rank = 0", "global_rank = 1")
            + "\n")
    ds = load(tmp_path, text)
    tb = ds.events[ds.events.kind == "traceback"].sort_values("line")
    assert records(tb, "host", "exception_type", "innermost_function") == [
        ("node07", "ValueError", "f"), ("node08", "KeyError", "g")]
    assert records(ds.iterations, "rank", "collector") == [(1, "srun")]
