"""Building the compiled scanners ahead of use: ``python -m forensics.readers.prebuild [--host]
[DIR]``.

For a container image or a shared cluster install, run once after ``pip install`` (as the user
who installed it): the log and JSON Lines scanners (and the replay's frame builder) are compiled and their objects saved into the
package (``forensics/readers/compiled/_prebuilt``, else the per-user cache, or ``DIR``), so no user's
first large ingest builds anything. By default for a portable CPU target
(:data:`library.PORTABLE_CPU`: any machine of this architecture); ``--host`` for this
machine's CPU only (what a background build makes). Measured on a 67 MB log (whole warm
``forensics ingest`` processes, 6 interleaved pairs, load 6.4-6.6): portable median 1.95 s CPU,
host-tuned 1.63 s.
"""
from __future__ import annotations

import sys
from pathlib import Path

from forensics.readers import frame_builder, json_scan
from forensics.readers.compiled import builder
from forensics.readers.compiled.library import SCAN


def main(argv: list[str]) -> int:
    host = "--host" in argv
    rest = [a for a in argv if a != "--host"]
    stems = builder.prebuild([SCAN, json_scan.LIBRARY, frame_builder.LIBRARY],
                             Path(rest[0]) if rest else None, portable=not host)
    for stem in stems:
        print(stem)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
