"""Building the compiled scanners ahead of use: ``python -m forensics.ingest.prebuild [--host]
[DIR]``.

For a container image or a shared cluster install, run once after ``pip install`` (as the user
who installed it): the log and JSON Lines scanners are compiled and their objects saved into the
package (``forensics/ingest/_prebuilt``, else the per-user cache, or ``DIR``), so no user's
first large ingest builds anything. By default for a portable CPU target
(:data:`native_code.PORTABLE_CPU`: any machine of this architecture); ``--host`` for this
machine's CPU only (what a background build makes; ``benchmarks/ingest.py`` compares them).
"""
from __future__ import annotations

import sys
from pathlib import Path

from forensics.ingest import json_scan, native_code


def main(argv: list[str]) -> int:
    host = "--host" in argv
    rest = [a for a in argv if a != "--host"]
    stems = native_code.prebuild([native_code.SCAN, json_scan.LIBRARY],
                                 Path(rest[0]) if rest else None, portable=not host)
    for stem in stems:
        print(stem)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
