"""The trace writer: frames encoded as the v1 format, buffered, never over an existing file."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from forensics.record import writer
from forensics.record.writer import FrameRecord, encode_frame


@pytest.mark.parametrize("ids,states,dummies", [
    ([], [], []),
    ([1, 2, 3], [13, 14, 9], [False] * 3),
    ([4, 0], [10, 13], [False, True]),
    ([5], ["GENERATION_TO_COMPLETE"], [False]),
])
def test_encoded_frames_are_the_json_of_the_format(ids, states, dummies):
    fr = FrameRecord(7, 2, ids, states, dummies, 3, len(ids))
    fr.padded, fr.scheduled, fr.can_queue = True, 0, False
    reqs = [{"id": i, "state": s, **({"dummy": True} if d else {})}
            for i, s, d in zip(ids, states, dummies)]
    assert json.loads(encode_frame(fr)) == {"kind": "frame", "iter": 7, "rank": 2,
                                            "requests": reqs, "expected": 3, "padded": True,
                                            "scheduled": 0, "can_queue": False}
    assert encode_frame(fr).endswith("}\n") and encode_frame(fr).count("\n") == 1


def test_writer_buffers_until_a_flush_is_due(tmp_path, monkeypatch):
    monkeypatch.setattr(writer, "FLUSH_EVERY_FRAMES", 3)
    monkeypatch.setattr(writer, "FLUSH_EVERY_SECONDS", 3600.0)
    fd, path = writer.open_trace_file(str(tmp_path), "rank-0")
    w = writer.TraceWriter(fd, path)
    for i in range(2):
        w.add(FrameRecord(i, 0, [1], [13], [False], 1, 1))
    assert Path(path).read_text() == ""
    w.add(FrameRecord(2, 0, [1], [13], [False], 1, 1))
    assert [json.loads(x)["iter"] for x in Path(path).read_text().splitlines()] == [0, 1, 2]
    w.close()


def test_an_existing_trace_file_is_never_overwritten(tmp_path):
    (tmp_path / "rank-0.jsonl").write_text("old\n")
    fd, path = writer.open_trace_file(str(tmp_path), "rank-0")
    os.close(fd)
    assert path == str(tmp_path / f"rank-0.{os.getpid()}.jsonl")
    assert (tmp_path / "rank-0.jsonl").read_text() == "old\n"


def test_the_encoder_reuses_an_unchanged_request_list_only_when_nothing_changed():
    enc = writer.FrameEncoder()
    frames = [FrameRecord(0, 0, [1, 2], [13, 13], [False, False], 2, 2),
              FrameRecord(1, 0, [1, 2], [13, 13], [False, False], 2, 2),   # same list: reused
              FrameRecord(2, 0, [1, 2], [13, 14], [False, False], 2, 2),   # a state changed
              FrameRecord(3, 0, [1, 2], [13, 14], [False, True], 2, 2),    # a dummy flag changed
              FrameRecord(4, 0, [1, 3], [13, 14], [False, True], 2, 2)]    # an id changed
    assert [enc.encode(f) for f in frames] == [encode_frame(f) for f in frames]


def test_encoded_frames_carry_postpadded_and_only_a_false_alloc_ok():
    for ids, states in (([1], [13]), ([1], ["GENERATION_IN_PROGRESS"])):   # fast and slow path
        fr = FrameRecord(3, 0, ids, states, [False], 1, 1)
        assert "postpadded" not in json.loads(encode_frame(fr))
        fr.postpadded, fr.scheduled = True, 1
        assert json.loads(encode_frame(fr))["postpadded"] is True
        assert "alloc_ok" not in json.loads(encode_frame(fr))
        fr.alloc_ok = False
        assert json.loads(encode_frame(fr))["alloc_ok"] is False
