"""Suite-wide settings: the hypothesis profiles, the compiled scanners built once per run, and
what the collection imported kept out of the garbage collector's walks.

Every property test takes its number of examples from the loaded profile (none sets its own):

- ``default``: a short run per property, what the README's ``python -m pytest -q`` uses;
- ``long``: the depth of a fuzz campaign, what ``benchmarks/fuzz.py`` runs the properties with.

Choose one with ``--hypothesis-profile long`` or ``HYPOTHESIS_PROFILE=long`` (the option wins).
"""
from __future__ import annotations

import contextlib
import gc
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

from forensics import user_cache
from forensics.readers import frame_builder, json_scan
from forensics.readers.compiled import library, loader

#: Examples per property in a default run, and in a ``long`` one.
DEFAULT_EXAMPLES = 15
LONG_EXAMPLES = 1000

settings.register_profile("default", max_examples=DEFAULT_EXAMPLES, deadline=None)
settings.register_profile("long", max_examples=LONG_EXAMPLES, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile the scanners (and the frame builder) this machine has not saved yet once for the
    whole run, one process per scanner at once, before the test processes start. Otherwise each
    pytest-xdist worker compiled both itself, on importing the test modules that ask for them
    (measured on an empty cache: ~25 s and ~30 s of CPU, paid by each of the 2 workers)."""
    if hasattr(session.config, "workerinput"):   # a pytest-xdist worker: its controller did it
        return
    if importlib.util.find_spec("numba") is None or user_cache.writable_cache_dir("native") is None:
        return
    # the package the tests import, whatever the working directory (the saved code is keyed
    # to its source)
    root = str(Path(json_scan.__file__).resolve().parents[2])
    path = [root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path), FORENSICS_FRAMES_PATH="native")
    capture = session.config.pluginmanager.get_plugin("capturemanager")
    # the loader's one-line note shows
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        scanners = (("native_scan", library.SCAN), ("json_scan", json_scan.LIBRARY),
                    ("frame_builder", frame_builder.LIBRARY))
        builds = [subprocess.Popen([sys.executable, "-c",
                                    f"from forensics.readers import {name}; {name}.kernel()"],
                                   env=env)
                  for name, lib in scanners if loader.entry_points(lib, compile="never") is None]
        for build in builds:
            build.wait()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Move every object the collection made (the libraries and test modules imported: ~220,000
    in a whole run, long-lived) to the permanent generation (``gc.freeze``), as the commands
    do for their imports (``forensics.cli.process_setup.imports_without_gc``): the collector's
    full passes during the tests no longer walk them (measured on tests/replay and
    tests/report: 1.5 s CPU in collections instead of 2.6 s)."""
    gc.freeze()
