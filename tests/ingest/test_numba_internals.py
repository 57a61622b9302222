"""The pin of what the compiled scanners' loader takes from numba's internals and llvmlite
(``forensics.readers.compiled.numba_internals``).

The first two tests fail loudly when numba or llvmlite change: the installed versions must be
the ones the loader was checked against, and must have every internal it reads. The others
simulate a changed numba or llvmlite (the pinned version moved away, an internal deleted) and
check that the loader takes its fallback, says so, and the rows read are still right.
"""
from __future__ import annotations

import importlib
import importlib.util
import logging
import os
from pathlib import Path

import pytest

from forensics.readers import native_scan
from forensics.readers.compiled import cache_dirs, numba_internals
from forensics.readers.compiled.library import SCAN
from forensics.readers.executor_log import parse_executor_log

pytestmark = pytest.mark.skipif(importlib.util.find_spec("numba") is None
                                or importlib.util.find_spec("llvmlite") is None,
                                reason="numba or llvmlite not installed")

#: Two iteration lines the compiled scanner takes (fast lines), their values worked by hand.
LINES = [
    ("[11/30/2026-12:00:01] [TRT-LLM] [RANK 3] [I] iter = 12, global_rank = 3, rank = 3, "
     "num_scheduled_requests = 2, kv_cache_util = 0.125, currank_total_requests = 4/32, "
     "host_step_time = 11.5ms, prev_device_step_time = N/A, timestamp = 2026-11-30 12:00:01, "
     "states = {'num_ctx_requests': 1, 'num_ctx_tokens': 512, 'num_generation_tokens': 3}"),
    ("[02/29/2024-23:59:59] [TRT-LLM] [RANK 0] [W] iter = 13, global_rank = 0, rank = 0, "
     "num_scheduled_requests = 0, kv_cache_util = N/A, currank_total_requests = 0/0, "
     "host_step_time = 5ms, prev_device_step_time = 1.25ms, timestamp = 2024-02-29 23:59:59, "
     "states = {'num_ctx_requests': 0, 'num_ctx_tokens': 0, 'num_generation_tokens': 7}"),
]
#: (column, values) of those lines' iteration rows.
EXPECTED = {"iter": [12, 13], "rank": [3, 0], "num_scheduled_requests": [2, 0],
            "kv_cache_util": [0.125, None], "num_ctx_tokens": [512, 0],
            "num_generation_tokens": [3, 7]}


def _kernels():
    """The kernel modules, compiled by numba (its cache, where the loader keeps it, makes this
    a load after the first)."""
    cache_dirs.set_numba_cache()
    from forensics.readers.compiled import json_kernel, scan_kernel

    return {"scan_kernel": scan_kernel, "json_kernel": json_kernel}


def test_the_installed_numba_and_llvmlite_are_the_pinned_ones():
    import llvmlite
    import numba

    assert (numba.__version__, llvmlite.__version__) == (
        numba_internals.NUMBA_CHECKED, numba_internals.LLVMLITE_CHECKED), (
        f"numba {numba.__version__} / llvmlite {llvmlite.__version__} installed, the compiled "
        f"scanners' loader was checked against numba {numba_internals.NUMBA_CHECKED} / llvmlite "
        f"{numba_internals.LLVMLITE_CHECKED}: run tests/ingest (test_numba_internals, "
        "test_native_scan, test_json_scan, test_scanner_cache) and update the pin in "
        "forensics/readers/compiled/numba_internals.py")


def test_the_installed_numba_and_llvmlite_have_what_the_loader_uses():
    import llvmlite.binding as llvm

    for name, module in _kernels().items():
        gone = numba_internals.numba_missing(module.ENTRY_POINTS, always=True)
        assert gone == [], f"{name}: {numba_internals.changed('numba', gone)}"
        for cf in module.ENTRY_POINTS.values():
            _, obj = numba_internals.object_code(cf)
            assert obj[:4] == b"\x7fELF" or os.name != "posix" or obj[:4] in (
                b"\xcf\xfa\xed\xfe", b"\xfe\xed\xfa\xcf")      # ELF, or Mach-O on macOS
    gone = numba_internals.llvmlite_missing(llvm, always=True)
    assert gone == [], numba_internals.changed("llvmlite", gone)


def _log(tmp_path: Path) -> Path:
    path = tmp_path / "executor.log"
    path.write_text("\n".join(LINES) + "\n")
    return path


def _rows(path: Path, native: bool | None) -> list[dict]:
    return [r for b in parse_executor_log(path, "x", native=native)
            for r in b.iterations.to_pylist()]


def _saved(tmp_path: Path) -> list[str]:
    d = tmp_path / "cache" / "native"
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


def test_a_changed_numba_without_an_internal_runs_numba_functions(cold, tmp_path, monkeypatch,
                                                                  caplog):
    """numba moved past the pin and lost ``_get_module_for_linking``: the compile still gives
    numba's own functions (the same kernel), nothing is saved, a warning names what is gone."""
    from numba.core.codegen import CPUCodeLibrary

    monkeypatch.setattr(numba_internals, "NUMBA_CHECKED", "0.0.0")
    monkeypatch.delattr(CPUCodeLibrary, "_get_module_for_linking")
    with caplog.at_level(logging.WARNING, logger="forensics.readers.compiled"):
        assert native_scan.kernel() is not None
    notes = " ".join(r.getMessage() for r in caplog.records)
    assert "cfunc._library._get_module_for_linking" in notes and "0.0.0" in notes
    assert "numba's own functions" in notes
    assert _saved(tmp_path) == []
    path = _log(tmp_path)
    assert len(native_scan.scan_block(path.read_bytes()).fast_line) == 2   # the kernel read them
    native = _rows(path, True)
    assert native == _rows(path, False)
    for column, values in EXPECTED.items():
        assert [r[column] for r in native] == values, column


def test_a_changed_llvmlite_without_mcjit_reads_with_the_reference_reader(cold, tmp_path,
                                                                          monkeypatch, caplog):
    """llvmlite moved past the pin and lost MCJIT: no saved scanner is linked, no build is
    started, big inputs go to the reference reader (one warning says why); asked to compile in
    the process (``FORENSICS_INGEST_PATH=native``), numba's own functions read, the same rows."""
    import llvmlite.binding as llvm

    # numba itself compiles through MCJIT: compile the kernel before MCJIT goes (as a process
    # that had compiled it does), so the test holds run alone as well as after the others.
    importlib.import_module(SCAN.module)
    monkeypatch.setattr(numba_internals, "LLVMLITE_CHECKED", "0.0.0")
    monkeypatch.delattr(llvm, "create_mcjit_compiler")
    with caplog.at_level(logging.WARNING, logger="forensics.readers.compiled"):
        assert not native_scan.enabled(1 << 40)
        assert not native_scan.enabled(1 << 40)
    assert cold == []
    (note,) = [r.getMessage() for r in caplog.records]
    assert "llvmlite.binding.create_mcjit_compiler" in note and "reference reader" in note
    assert _saved(tmp_path) == []

    monkeypatch.setattr(native_scan, "_kernel", None)
    monkeypatch.setenv(native_scan.PATH_ENV, "native")
    path = _log(tmp_path)
    assert native_scan.enabled(path.stat().st_size)
    native = _rows(path, None)
    assert native == _rows(path, False)
    assert [r["iter"] for r in native] == [12, 13]
    assert _saved(tmp_path) == [] and cold == []
