"""What the loader takes from numba's internals and llvmlite, pinned to the versions it was
checked against.

numba offers no public way to get a compiled function's object code. Of each ``cfunc`` entry
point a build (:mod:`forensics.readers.compiled.builder`) reads ``cf._library`` (its code
library), that library's ``_get_module_for_linking()`` (the optimised LLVM module numba keeps
for linking, there also when loaded from numba's cache), numba's own target machine
``_library._codegen._tm`` (its ``emit_object`` writes the object) and ``cf.native_name``
(:data:`CFUNC_INTERNALS`, read by :func:`object_code` only). Of numba's modules it sets
``numba.core.config.CACHE_DIR``, and the JSON kernels pass the private option ``_nrt=False``
(:data:`MODULE_INTERNALS`); the numba runtime symbols the wrappers name are defined by the
loader itself (``library.STUBBED``). Of llvmlite it uses the binding API of
:data:`LLVMLITE_API` (MCJIT, which a later llvmlite may drop).

With :data:`NUMBA_CHECKED` / :data:`LLVMLITE_CHECKED` installed these are used as they are.
With another version, :func:`numba_missing` / :func:`llvmlite_missing` check that each still
exists before it is used; when one is gone the loader takes its fallback with a warning naming
it: numba's own compiled functions, nothing saved, when numba changed; the reference reader
when llvmlite did. ``tests/ingest/test_numba_internals.py`` fails loudly when the installed
versions differ from the pin or lack what is listed here.
"""
from __future__ import annotations

import sys
from typing import Any

#: The numba version the loader's use of numba's internals was checked against.
NUMBA_CHECKED = "0.68.1"
#: The llvmlite version the loader's linking was checked against.
LLVMLITE_CHECKED = "0.50.0"

#: Attribute paths the loader reads on a compiled ``cfunc`` (all numba-private but
#: ``native_name``).
CFUNC_INTERNALS = ("_library", "_library._get_module_for_linking",
                   "_library._codegen._tm.emit_object", "native_name")
#: Attribute paths :func:`pic_object_code` reads on a compiled ``cfunc`` besides those of
#: :data:`CFUNC_INTERNALS`: the CPU name and features numba compiles for.
PIC_INTERNALS = ("_library._codegen._get_host_cpu_name", "_library._codegen._tm_features",
                 "_library._codegen._tm.triple")
#: Attribute paths the loader and the kernels use in numba's modules (from ``numba``).
MODULE_INTERNALS = ("core.config.CACHE_DIR", "core.cpu.CPUTargetOptions._nrt")
#: What the loader calls of ``llvmlite.binding``.
LLVMLITE_API = ("add_symbol", "create_mcjit_compiler", "parse_assembly",
                "ObjectFileRef.from_data", "Target.from_default_triple",
                "initialize_native_target", "initialize_native_asmprinter", "get_process_triple",
                "get_host_cpu_name", "get_host_cpu_features")


class NumbaChanged(RuntimeError):
    """The installed numba lacks an internal the loader needs to save a kernel's object code."""


def _has(obj: Any, path: str) -> bool:
    for name in path.split("."):
        try:
            obj = getattr(obj, name)
        except AttributeError:
            return False
    return True


def _version(module_name: str) -> str | None:
    module = sys.modules.get(module_name)
    return getattr(module, "__version__", None) if module is not None else None


def numba_missing(entry: dict[str, Any], *, always: bool = False) -> list[str]:
    """The internals of :data:`CFUNC_INTERNALS` (on the cfuncs of ``entry``) and
    :data:`MODULE_INTERNALS` the imported numba lacks; not looked for when it is
    :data:`NUMBA_CHECKED`, unless ``always``."""
    if not always and _version("numba") == NUMBA_CHECKED:
        return []
    gone = {f"cfunc.{p}" for cf in entry.values() for p in CFUNC_INTERNALS if not _has(cf, p)}
    numba = sys.modules.get("numba")
    gone |= {f"numba.{p}" for p in MODULE_INTERNALS if not _has(numba, p)}
    return sorted(gone)


def llvmlite_missing(llvm: Any, *, always: bool = False) -> list[str]:
    """The names of :data:`LLVMLITE_API` that ``llvm`` (``llvmlite.binding``) lacks; not looked
    for when llvmlite is :data:`LLVMLITE_CHECKED`, unless ``always``."""
    if not always and _version("llvmlite") == LLVMLITE_CHECKED:
        return []
    return [f"llvmlite.binding.{p}" for p in LLVMLITE_API if not _has(llvm, p)]


def changed(package: str, gone: list[str]) -> str:
    """One phrase for a warning: which installed version lacks what, and the pinned one."""
    checked = NUMBA_CHECKED if package == "numba" else LLVMLITE_CHECKED
    return (f"{package} {_version(package)} lacks {', '.join(gone)} (the loader was checked "
            f"against {package} {checked})")


def version_note() -> str:
    """`` (numba X; the loader was checked against Y)`` when the imported numba is not the
    pinned one, else ``""``: for a warning about a kernel numba would not compile."""
    version = _version("numba")
    if version is None or version == NUMBA_CHECKED:
        return ""
    return f" (numba {version}; the loader was checked against {NUMBA_CHECKED})"


def object_code(cf: Any) -> tuple[Any, bytes]:
    """The LLVM module numba keeps for linking ``cf`` (a cfunc's library holds its callees'
    code too) and its object code, emitted by numba's own target machine. Raises
    :class:`NumbaChanged` when numba (not :data:`NUMBA_CHECKED`) lacks what this reads."""
    gone = numba_missing({"cf": cf})
    if gone:
        raise NumbaChanged(changed("numba", gone))
    library = cf._library
    module = library._get_module_for_linking()
    return module, library._codegen._tm.emit_object(module)


def pic_object_code(cf: Any, llvm: Any) -> bytes:
    """``cf``'s code (as :func:`object_code`) emitted as a position-independent object for the
    CPU and features numba compiled it for: what a shared library is linked from. Raises
    :class:`NumbaChanged` when numba lacks what this reads (checked whatever its version:
    it is no fallback's business but an optional extra)."""
    gone = numba_missing({"cf": cf}) + [f"cfunc.{p}" for p in PIC_INTERNALS if not _has(cf, p)]
    if gone:
        raise NumbaChanged(changed("numba", gone))
    library = cf._library
    codegen = library._codegen
    machine = llvm.Target.from_triple(codegen._tm.triple).create_target_machine(
        cpu=codegen._get_host_cpu_name(), features=codegen._tm_features, opt=3, reloc="pic",
        codemodel="default")
    return machine.emit_object(library._get_module_for_linking())


__all__ = ["CFUNC_INTERNALS", "LLVMLITE_API", "LLVMLITE_CHECKED", "MODULE_INTERNALS",
           "NUMBA_CHECKED", "NumbaChanged", "PIC_INTERNALS", "changed", "llvmlite_missing",
           "numba_missing", "object_code", "pic_object_code", "version_note"]
