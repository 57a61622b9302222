"""The kinds an input file is read as, as ``_meta.json`` records them (``inputs[].kind``).

- ``log``, ``stats``, ``trace``: :data:`KINDS`, the readers a user can force (``--kind``);
- ``json`` (:data:`OTHER_JSON`): JSON that is neither stats nor a trace, named explicitly and
  kept verbatim in ``unparsed`` (:func:`forensics.readers.kinds.detect_kind` says when).
"""
from __future__ import annotations

KINDS = ("log", "stats", "trace")
#: The kind of JSON that is neither stats nor a trace (kept verbatim when named explicitly).
OTHER_JSON = "json"

__all__ = ["KINDS", "OTHER_JSON"]
