"""The request-state trace (format v2, traces/FORMAT.md) of a simulated run.

One run record (``build`` = the policy's name), then per body one frame per rank: the rank's
``active_requests`` at pad entry in list order, a dummy that survived an earlier iteration at its
position, and the recorded decisions ``expected``, ``padded``, ``scheduled`` and ``can_queue``
(``alloc_ok: false`` where the rank asked for a dummy, in the pad step or after scheduling, and
got None; ``kv_precheck_ok: false`` where the KV-capacity precheck ran there and said the dummy
cannot fit). A policy with the post-schedule pad step (PR #17379) also records ``postpadded`` on
every frame (``decide()``'s own decision), so a replay need not infer that dummy from
``scheduled``; other policies have no such step and leave it out, as the recorder does on a build
without ``_pad_empty_attention_dp_batch``. The crash body's frames record only ``expected`` (and
``alloc_ok``, ``kv_precheck_ok``): the fleet never reached its other decisions.
"""
from __future__ import annotations

import io
import json
from typing import Any

from forensics.simulate.run_loop import Body
from replay.config import RunConfig
from replay.states import (
    CURRENT_NUMBERING,
    CONTEXT_DUMMY_STATE,
    DUMMY_REQUEST_ID,
    GENERATION_DUMMY_STATE,
    RequestState,
)


def run_record(config: RunConfig, *, build: str, run_id: str, extra: dict[str, Any] | None = None
               ) -> dict[str, Any]:
    """The run record (trace format v2) of a simulated run: ``model_arch`` is the workload's
    (null when it names none)."""
    rec: dict[str, Any] = {
        "kind": "run", "format": "adp-trace", "version": 2, "tp_size": config.tp_size,
        "pp_size": config.pp_size, "max_batch_size": config.max_batch_size,
        "max_num_active_requests": config.cap, "disaggregated": config.disaggregated,
        "overlap_scheduler": config.overlap_scheduler, "build": build, "run_id": run_id,
        "expected_multiplier": config.expected_multiplier, "model_arch": config.model_arch,
    }
    if extra:
        rec.update(extra)
    return rec


class TraceWriter:
    """Writes ``trace.jsonl`` body by body.

    Args:
        f: a text stream opened for writing.
        record: the run record (see :func:`run_record`).
        state_names: write states as names (readable) or ints (smaller).
        postpad: the simulated version pads an empty batch after scheduling (PR #17379): write
            ``postpadded`` on every frame that reached its decisions.
    """

    def __init__(self, f: io.TextIOBase, *, record: dict[str, Any], state_names: bool = True,
                 postpad: bool = False):
        self.f = f
        self.postpad = bool(postpad)
        self.R = int(record["tp_size"])
        # The numbering is declared whether states are written as names or ints (v2: integers
        # only with a declared numbering), so any integer state added later reads right.
        record = {**record, "state_numbering": CURRENT_NUMBERING}
        f.write(json.dumps(record, separators=(", ", ": ")) + "\n")
        if state_names:
            self.frag = {int(s): f', "state": "{s.name}"}}' for s in RequestState}
        else:
            self.frag = {int(s): f', "state": {int(s)}}}' for s in RequestState}
        self.dummy = {role_ctx: '{"id": ' + str(DUMMY_REQUEST_ID) + frag[:-1] + ', "dummy": true}'
                      for role_ctx, frag in ((False, self.frag[int(GENERATION_DUMMY_STATE)]),
                                             (True, self.frag[int(CONTEXT_DUMMY_STATE)]))}

    def body(self, b: Body) -> None:
        out = b.out
        frag = self.frag
        n = b.n_real.tolist()
        lines = []
        for r in range(self.R):
            k = n[r]
            reqs = ['{"id": ' + str(i) + frag[s]
                    for i, s in zip(b.ids[r, :k].tolist(), b.states[r, :k].tolist())]
            if b.carried[r]:
                reqs.insert(int(b.carried_pos[r]), self.dummy[bool(b.carried_context[r])])
            head = f'{{"kind": "frame", "iter": {b.iter}, "rank": {r}, "requests": [{", ".join(reqs)}]'
            if b.crashed:
                tail = f', "expected": {int(out.expected[r])}'
            else:
                tail = (f', "expected": {int(out.expected[r])}, '
                        f'"padded": {"true" if out.padded[r] else "false"}, '
                        f'"scheduled": {int(out.batch[r])}, '
                        f'"can_queue": {"true" if out.can_queue[r] else "false"}')
                if self.postpad:
                    tail += f', "postpadded": {"true" if out.postpadded[r] else "false"}'
            if b.alloc_recorded_fail[r]:
                tail += ', "alloc_ok": false'
            if b.precheck_recorded_fail[r]:
                tail += ', "kv_precheck_ok": false'
            lines.append(head + tail + "}\n")
        self.f.write("".join(lines))

    def close(self) -> None:
        pass
