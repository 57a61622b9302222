"""Tracebacks keep every frame (issue 13 item 1): table ``traceback_frames``, the executor
frame on the event, chained exceptions as one event, excepthook headers and logger-prefixed
first lines joined, collector lines absorbed, cut tracebacks still giving their frames.
Tracebacks are written here in the shapes Python prints them."""
from __future__ import annotations

from .test_log_shapes import load, records

PKG = "/usr/local/lib/python3.12/dist-packages"
EXECUTOR = f"{PKG}/tensorrt_llm/_torch/pyexecutor/py_executor.py"


def frames_text(funcs_files: list[tuple[str, str, int]], indent: str = "") -> list[str]:
    out = []
    for func, file, line in funcs_files:
        out += [f'{indent}  File "{file}", line {line}, in {func}',
                f"{indent}    {func}_body(x)",
                f"{indent}    {'^' * (len(func) + 7)}"]
    return out


LOOP = [("_bootstrap_inner", "/usr/lib/python3.12/threading.py", 1073),
        ("_event_loop_wrapper", EXECUTOR, 331),
        ("_executor_loop_overlap", EXECUTOR, 1459),
        ("_forward_step", EXECUTOR, 2133),
        ("_call_impl", f"{PKG}/torch/nn/modules/module.py", 1762)]


def test_every_frame_is_kept_and_the_executor_frame_is_on_the_event(tmp_path):
    text = "\n".join(["Exception in thread Thread-3 (_event_loop_wrapper):",
                      "Traceback (most recent call last):", *frames_text(LOOP),
                      "RuntimeError: CUDA error: an illegal memory access was encountered"]) + "\n"
    ds = load(tmp_path, text)
    ev = ds.events.iloc[0]
    assert (ev.kind, ev.line, ev.line_end) == ("traceback", 1, 2 + 3 * len(LOOP) + 1)
    assert (ev.innermost_function, ev.innermost_line) == ("_call_impl", 1762)
    assert (ev.executor_file, ev.executor_line, ev.executor_function) == (
        EXECUTOR, 2133, "_forward_step")
    assert ev.exception_type == "RuntimeError"
    fr = ds.traceback_frames.sort_values("depth")
    assert fr.function.tolist() == [f for f, _, _ in LOOP]
    assert fr.depth.tolist() == list(range(len(LOOP)))
    assert set(fr.line) == {1} and set(fr.chain) == {0}
    assert fr.code.tolist() == [f"{f}_body(x)" for f, _, _ in LOOP]   # carets are not code
    assert fr.at_line.tolist() == [3 + 3 * k for k in range(len(LOOP))]


def test_chained_exceptions_are_one_event_with_the_chain(tmp_path):
    text = "\n".join([
        "Traceback (most recent call last):", *frames_text(LOOP[3:4]),
        "KeyError: 'req 7'", "",
        "During handling of the above exception, another exception occurred:", "",
        "Traceback (most recent call last):", *frames_text(LOOP[1:3]),
        "ValueError: no such request", "",
        "The above exception was the direct cause of the following exception:", "",
        "Traceback (most recent call last):", *frames_text(LOOP[:1]),
        "RuntimeError: executor loop failed", "",
        "after the chain"]) + "\n"
    ds = load(tmp_path, text)
    tb = ds.events[ds.events.kind == "traceback"]
    assert len(tb) == 1
    ev = tb.iloc[0]
    assert (ev.line, ev.line_end) == (1, 24)      # the blank line after the last one is not in
    assert (ev.exception_type, ev.message) == ("RuntimeError", "executor loop failed")
    assert ev.exception_chain.splitlines() == [
        "KeyError: 'req 7'", "ValueError: no such request", "RuntimeError: executor loop failed"]
    # the executor frame is the innermost tensorrt_llm frame of the last traceback that has one
    assert ev.executor_function == "_executor_loop_overlap"
    fr = ds.traceback_frames
    assert records(fr.sort_values(["chain", "depth"]), "chain", "depth", "function") == [
        (0, 0, "_forward_step"), (1, 0, "_event_loop_wrapper"), (1, 1, "_executor_loop_overlap"),
        (2, 0, "_bootstrap_inner")]
    assert ds.unparsed.sort_values("line").text.tolist() == ["", "after the chain"]


def test_two_tracebacks_back_to_back_stay_two_events(tmp_path):
    one = ["Traceback (most recent call last):", *frames_text(LOOP[3:4]), "KeyError: 1"]
    two = ["Traceback (most recent call last):", *frames_text(LOOP[2:3]), "ValueError: 2"]
    ds = load(tmp_path, "\n".join(one + two + [""] + one) + "\n")
    tb = ds.events.sort_values("line")
    assert records(tb, "kind", "line", "line_end", "exception_type") == [
        ("traceback", 1, 5, "KeyError"), ("traceback", 6, 10, "ValueError"),
        ("traceback", 12, 16, "KeyError")]
    assert ds.unparsed.line.tolist() == [11]


def test_a_logger_prefixed_first_line_joins_its_traceback(tmp_path):
    text = "\n".join(["[11/30/2026-12:00:01] [TRT-LLM] [RANK 2] [E] Traceback (most recent call last):",
                      *frames_text(LOOP[1:4]), "AssertionError: bad batch"]) + "\n"
    ds = load(tmp_path, text)
    assert records(ds.events, "kind", "line", "line_end", "rank", "exception_type",
                   "executor_function") == [("traceback", 1, 11, 2, "AssertionError",
                                             "_forward_step")]


def test_an_excepthook_header_joins_across_collector_lines(tmp_path):
    body = ["Exception in thread Thread-3 (_event_loop_wrapper):",
            "Traceback (most recent call last):", *frames_text(LOOP[1:3]),
            "RuntimeError: boom"]
    lines = []
    for k, ln in enumerate(body):
        lines += [f"\t2025-12-04 22:23:18.{k:03d}\t", ln]
    ds = load(tmp_path, "\n".join(lines) + "\n")
    tb = ds.events[ds.events.kind == "traceback"]
    assert records(tb, "line", "line_end", "exception_type", "executor_function",
                   "collector_time") == [(2, len(lines), "RuntimeError", "_executor_loop_overlap",
                                          "2025-12-04 22:23:18.000")]
    # the timestamp line before the header dates it; the ones inside are absorbed
    assert records(ds.events[ds.events.kind != "traceback"], "kind", "line") == [
        ("collector_timestamp", 1)]
    assert len(ds.unparsed) == 0 and len(ds.traceback_frames) == 2


def test_a_traceback_cut_short_still_gives_its_frames(tmp_path):
    text = "\n".join(["Traceback (most recent call last):", *frames_text(LOOP[:3])]) + "\n"
    ds = load(tmp_path, text[:-30] + "\n")       # cut inside the last frame's source line
    ev = ds.events.iloc[0]
    assert ev.kind == "traceback" and ev.line_end == 9
    assert ev.exception_type is None or ev.exception_type != ev.exception_type  # null
    assert ds.traceback_frames.function.tolist() == [f for f, _, _ in LOOP[:3]]
    assert ev.executor_function == "_executor_loop_overlap"


def test_an_indented_traceback_reads_like_an_unindented_one(tmp_path):
    text = "\n".join(["    Traceback (most recent call last):", *frames_text(LOOP[2:4], "    "),
                      "    RuntimeError: boom", "    [TensorRT-LLM][ERROR] after"]) + "\n"
    ds = load(tmp_path, text)
    assert records(ds.events.sort_values("line"), "kind", "line", "line_end", "exception_type") == [
        ("traceback", 1, 8, "RuntimeError"), ("cpp_log", 9, 9, None)]
    assert ds.traceback_frames.function.tolist() == ["_executor_loop_overlap", "_forward_step"]


def test_interleaved_ranks_keep_their_frames_apart(tmp_path):
    a = ["Traceback (most recent call last):", *frames_text(LOOP[1:2]), "KeyError: a"]
    b = ["Traceback (most recent call last):", *frames_text(LOOP[3:4]), "KeyError: b"]
    lines = [f"{r}: {ln}" for pair in zip(a, b) for r, ln in zip((0, 1), pair)]
    ds = load(tmp_path, "\n".join(lines) + "\n")
    fr = ds.traceback_frames
    assert records(fr.sort_values("line"), "line", "function") == [
        (1, "_event_loop_wrapper"), (2, "_forward_step")]


def test_summary_shows_frames_per_traceback_and_collector_formats(tmp_path):
    from forensics.dataset.summary import summarize
    from forensics.report.summary import render_text

    one = ["Traceback (most recent call last):", *frames_text(LOOP[1:4]), "KeyError: 1"]
    two = ["Traceback (most recent call last):", *frames_text(LOOP[3:4]), "ValueError: 2"]
    stamp = "2025-12-04T22:23:18.869123456Z "
    lines = [stamp + ln for ln in one] + ["x"] + two + [
        "node07: [TensorRT-LLM][WARNING] w", "Exception in thread Thread-3 (_event_loop_wrapper):",
        "[TensorRT-LLM][INFO] i"]
    ds = load(tmp_path, "\n".join(lines) + "\n")
    s = summarize(ds)
    assert s.frames_per_traceback == {0: 1, 1: 1, 3: 1}
    assert s.collector_formats == {"kubectl": 1, "pdsh": 1}
    text = render_text(s)
    assert "frames per traceback: 0 (1 traceback), 1 (1 traceback), 3 (1 traceback)" in text
    assert "collector formats: kubectl 1, pdsh 1" in text
    assert s.to_dict()["frames_per_traceback"] == {"0": 1, "1": 1, "3": 1}


def test_a_lone_exception_line_hands_back_the_collector_line_it_read_past(tmp_path):
    """Found by benchmarks/fuzz.py: an exception line that starts no traceback had absorbed the
    collector timestamp line after it, and the line was lost."""
    ds = load(tmp_path, "RuntimeError: CUDA error\n2026-11-30T12:00:01.000001Z\nstray output\n")
    assert ds.unparsed.sort_values("line").line.tolist() == [1, 3]
    assert records(ds.events, "kind", "line") == [("collector_timestamp", 2)]
