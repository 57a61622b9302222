"""CUDA and torch.distributed failure messages, typed with the numbers they carry.

These come from below the executor (PyTorch, NCCL) and say why a rank died or hung:

* CUDA device-side assert, one line per failing thread (ATen kernels)::

    /pytorch/aten/src/ATen/native/cuda/TensorCompare.cu:112: _assert_async_cuda_kernel:
    block: [0,0,0], thread: [0,0,0] Assertion `probability tensor contains ...` failed.

  (one line in the log): kernel source file/line and kernel in ``innermost_*``, ``cuda_block``
  and ``cuda_thread`` as ``x,y,z``, the condition in ``message``;
* NCCL watchdog collective timeout (``ProcessGroupNCCL``)::

    [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST,
    NumelIn=131072000, NumelOut=131072000, Timeout(ms)=600000) ran for 600081 milliseconds
    before timing out.

  rank, ``seq_num``, ``op_type``, ``numel_in``, ``numel_out``, ``timeout_ms``, ``elapsed_ms``;
* CUDA out of memory (``torch.OutOfMemoryError``), the 2.x form "Tried to allocate 2.00 GiB.
  GPU 0 has a total capacity of 79.15 GiB of which 1.23 GiB is free." and the 1.x form "Tried
  to allocate 20.00 MiB (GPU 0; 79.35 GiB total capacity; ...; 5.19 MiB free; ...)": ``gpu``,
  ``requested_bytes``, ``total_bytes``, ``free_bytes``;
* torch.distributed store timeout (``DistStoreError``): "Timed out after 901 seconds waiting
  for clients. 1/2 clients joined.": ``timeout_ms``, ``clients_joined``, ``clients_expected``.

:func:`match` reads one line (a logged line, or the exception line of a traceback).
"""
from __future__ import annotations

import re
from typing import Any

from forensics.readers import event_kinds
from forensics.readers.int_fields import as_int

#: Vectorised pre-filter (joins ``log_events.CANDIDATE_PATTERN``).
CANDIDATE = (r"block: \[\d+,\d+,\d+\], thread: \[|Watchdog caught collective operation timeout|"
             r"CUDA out of memory|seconds waiting for clients")

_DEVICE_ASSERT = re.compile(
    r"(?P<file>[^\s:]+\.cuh?):(?P<line>\d+): (?P<kernel>.+?): block: \[(?P<block>\d+,\d+,\d+)\], "
    r"thread: \[(?P<thread>\d+,\d+,\d+)\] Assertion `?(?P<cond>.*?)`? failed\.?\s*$")
_WATCHDOG = re.compile(
    r"(?:\[Rank (?P<rank>\d+)\] )?Watchdog caught collective operation timeout: "
    r"WorkNCCL\((?P<work>[^)]*\)?[^)]*)\)(?: ran for (?P<elapsed>\d+) milliseconds)?")
_WORK_FIELD = re.compile(r"(?P<key>SeqNum|OpType|NumelIn|NumelOut|Timeout\(ms\))=(?P<value>[^,)]+)")
_OOM = re.compile(r"CUDA out of memory\. Tried to allocate (?P<req>[\d.]+ [KMGT]?i?B)")
_OOM_2 = re.compile(r"GPU (?P<gpu>\d+) has a total capacity of (?P<total>[\d.]+ [KMGT]?i?B) "
                    r"of which (?P<free>[\d.]+ [KMGT]?i?B) is free")
_OOM_1 = re.compile(r"\(GPU (?P<gpu>\d+); (?P<total>[\d.]+ [KMGT]?i?B) total capacity;"
                    r"(?:.*?; (?P<free>[\d.]+ [KMGT]?i?B) free;)?")
_STORE = re.compile(r"Timed out after (?P<secs>\d+) seconds waiting for clients\. "
                    r"(?P<joined>\d+)/(?P<expected>\d+) clients joined")
_UNITS = {"B": 1, "KB": 1 << 10, "KiB": 1 << 10, "MB": 1 << 20, "MiB": 1 << 20,
          "GB": 1 << 30, "GiB": 1 << 30, "TB": 1 << 40, "TiB": 1 << 40}


def _bytes(size: str | None) -> int | None:
    """``"2.00 GiB"`` in bytes (PyTorch prints binary units), None if unreadable or huge."""
    if not size:
        return None
    value, _, unit = size.partition(" ")
    try:
        n = int(float(value) * _UNITS[unit])
    except (ValueError, KeyError, OverflowError):
        return None
    return n if n < (1 << 63) else None


def match(body: str) -> dict[str, Any] | None:
    """The typed row fields (``kind`` and numbers) of a failure message in ``body``, else None.
    ``msg_rank`` is the rank the message names (used when the prefix gives none)."""
    if "block: [" in body:
        m = _DEVICE_ASSERT.search(body)
        if m:
            return {"kind": event_kinds.CUDA_DEVICE_ASSERT, "message": m["cond"],
                    "innermost_file": m["file"], "innermost_line": as_int(m["line"]),
                    "innermost_function": m["kernel"], "cuda_block": m["block"],
                    "cuda_thread": m["thread"], "default_severity": "E"}
    if "Watchdog caught" in body:
        m = _WATCHDOG.search(body)
        if m:
            work = {f["key"]: f["value"] for f in _WORK_FIELD.finditer(m["work"])}
            return {"kind": event_kinds.NCCL_TIMEOUT, "message": body,
                    "msg_rank": as_int(m["rank"], 32), "seq_num": as_int(work.get("SeqNum")),
                    "op_type": work.get("OpType"), "numel_in": as_int(work.get("NumelIn")),
                    "numel_out": as_int(work.get("NumelOut")),
                    "timeout_ms": as_int(work.get("Timeout(ms)")),
                    "elapsed_ms": as_int(m["elapsed"]), "default_severity": "E"}
    if "CUDA out of memory" in body:
        m = _OOM.search(body)
        if m:
            row: dict[str, Any] = {"kind": event_kinds.CUDA_OOM, "message": body,
                                   "requested_bytes": _bytes(m["req"]), "default_severity": "E"}
            g = _OOM_2.search(body) or _OOM_1.search(body)
            if g:
                row.update(gpu=as_int(g["gpu"], 32), total_bytes=_bytes(g["total"]),
                           free_bytes=_bytes(g["free"]))
            return row
    if "waiting for clients" in body:
        m = _STORE.search(body)
        if m:
            secs = as_int(m["secs"])
            return {"kind": event_kinds.DIST_TIMEOUT, "message": body,
                    "timeout_ms": secs * 1000 if secs is not None and secs < 1 << 50 else None,
                    "clients_joined": as_int(m["joined"]),
                    "clients_expected": as_int(m["expected"]), "default_severity": "E"}
    return None
