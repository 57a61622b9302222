"""An ``forensics ingest`` process never imports pandas (pyarrow would, ~0.3 s CPU) and starts no
OpenBLAS threads, and pyarrow still gives pandas objects once something in the process asks."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from forensics.simulate import simulate

REPO = Path(__file__).resolve().parents[2]

#: Runs the CLI as ``python -m forensics`` does and reports, at exit, whether pandas was imported.
_RUN_CLI = ("import atexit, runpy, sys\n"
            "import os\n"
            "atexit.register(lambda: print('PANDAS', 'pandas' in sys.modules, 'BLAS',\n"
            "                              os.environ.get('OPENBLAS_NUM_THREADS'), file=sys.stderr))\n"
            "sys.argv = ['/bin/forensics'] + sys.argv[1:]\n"
            "runpy.run_module('forensics', run_name='__main__')\n")


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), **extra)
    if "OPENBLAS_NUM_THREADS" not in extra:
        env.pop("OPENBLAS_NUM_THREADS", None)
    return env


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """A simulated run: executor log, stats JSON Lines and trace."""
    out = tmp_path_factory.mktemp("sim") / "run"
    simulate("nvbug-6438685", out_dir=out, iters=40, log_format="V4")
    return out


@pytest.mark.parametrize("path", ["native", "reference"])
@pytest.mark.parametrize("flags", [[], ["-q"], ["--json"]], ids=["text", "quiet", "json"])
def test_ingest_process_never_imports_pandas(inputs, tmp_path, path, flags):
    ds = tmp_path / "ds"
    out = subprocess.run([sys.executable, "-c", _RUN_CLI, "ingest", str(inputs), "-o", str(ds),
                          *flags], capture_output=True, text=True,
                         env=_env(FORENSICS_INGEST_PATH=path))
    assert out.returncode == 0, out.stderr
    assert "PANDAS False BLAS 1" in out.stderr
    import forensics
    loaded = forensics.load(ds)
    assert len(loaded.iterations) == 8 * 40 - 8 and len(loaded.frames) > 0


#: ``-c _MODULES_AFTER INPUTS ARGS...`` runs the CLI with ``ARGS`` as ``python -m forensics``
#: does and prints, at exit, the modules imported when it last opened a file under ``INPUTS``
#: and those imported by then.
_MODULES_AFTER = ("import atexit, json, os, runpy, sys\n"
                  "inputs, at_open = os.path.realpath(sys.argv[1]), []\n"
                  "def hook(event, args):\n"
                  "    if event == 'open' and isinstance(args[0], str) and \\\n"
                  "            os.path.realpath(args[0]).startswith(inputs):\n"
                  "        at_open[:] = sorted(sys.modules)\n"
                  "sys.addaudithook(hook)\n"
                  "atexit.register(lambda: print('MODULES', json.dumps([at_open, "
                  "sorted(sys.modules)])))\n"
                  "sys.argv = ['/bin/forensics'] + sys.argv[2:]\n"
                  "runpy.run_module('forensics', run_name='__main__')\n")


def test_ingest_imports_only_what_it_runs(inputs, tmp_path):
    """The writer's path: no DataFrame code (``forensics.dataset.store``, pandas) at all, and
    ``pyarrow.dataset`` (which reading a table needs, for the summary) not before the reading."""
    out = subprocess.run([sys.executable, "-c", _MODULES_AFTER, str(inputs), "ingest", str(inputs),
                          "-o", str(tmp_path / "ds"), "-q"], capture_output=True, text=True,
                         env=_env())
    assert out.returncode == 0, out.stderr
    at_open, at_exit = map(set, json.loads(out.stdout.rsplit("MODULES ", 1)[1]))
    assert "forensics.dataset.writer" in at_open and "pyarrow.parquet" in at_open
    assert "pyarrow.dataset" not in at_open
    unwanted = {"pandas", "forensics.dataset.store", "forensics.readers.dataset_cache"}
    assert sorted(unwanted & at_exit) == []


def test_log_ingest_never_imports_pyarrow_dataset(inputs, tmp_path):
    """A log alone: its summary (tracebacks and their frames included) reads the tables it
    wrote file by file, so ``pyarrow.dataset`` (~0.01 s CPU to import) is never imported."""
    log = tmp_path / "inputs" / "executor.log"
    log.parent.mkdir()
    log.write_text((inputs / "executor.log").read_text() + "Traceback (most recent call last):\n"
                   '  File "/x/tensorrt_llm/_torch/pyexecutor/py_executor.py", line 9, in f\n'
                   "    g()\nKeyError: None\n")
    out = subprocess.run([sys.executable, "-c", _MODULES_AFTER, str(log.parent), "ingest",
                          str(log), "-o", str(tmp_path / "ds"), "--json"], capture_output=True, text=True,
                         env=_env())
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout.rsplit("MODULES ", 1)[0])["summary"]
    assert summary["frames_per_traceback"], "the log has no traceback: nothing tested"
    at_exit = set(json.loads(out.stdout.rsplit("MODULES ", 1)[1])[1])
    assert "pyarrow.parquet" in at_exit and "pyarrow.dataset" not in at_exit


def test_a_users_openblas_threads_are_kept(inputs, tmp_path):
    out = subprocess.run([sys.executable, "-c", _RUN_CLI, "ingest", str(inputs), "-o",
                          str(tmp_path / "ds"), "-q"], capture_output=True, text=True,
                         env=_env(OPENBLAS_NUM_THREADS="2"))
    assert out.returncode == 0, out.stderr
    assert "PANDAS False BLAS 2" in out.stderr


def test_pyarrow_without_the_set_up_imports_pandas():
    """The control: what the ingest command avoids (if pyarrow stops importing pandas on its own,
    the set-up is no longer needed)."""
    code = "import sys, pyarrow as pa; pa.array([0]); print('pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    if out.stdout.strip() != "True":
        pytest.skip("this pyarrow does not import pandas on pa.array")


#: Imports the ingest command's module as ``python -m forensics ingest`` does (argv says so).
_AS_INGEST = ("import sys\n"
              "sys.argv = ['/x/forensics/__main__.py', 'ingest', 'LOG', '-o', 'DS']\n"
              "import forensics.cli.ingest\n")


def _printed(code: str) -> list[str]:
    """The lines ``code`` printed, run in a fresh interpreter on this tree."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env())
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


@pytest.mark.parametrize("as_ingest", [True, False], ids=["ingest_process", "other_process"])
def test_from_pandas_first(as_ingest):
    """In an ingest process pyarrow is told there is no pandas: a first ``from_pandas`` there
    reads a categorical as strings. Any other process importing the module is left alone."""
    code = ((_AS_INGEST if as_ingest else "import sys\nimport forensics.cli.ingest\n") +
            "import pandas as pd, pyarrow as pa\n"
            "df = pd.DataFrame({'c': pd.Categorical(['u', 'v']), 'x': [1, 2]})\n"
            "t = pa.Table.from_pandas(df, preserve_index=False)\n"
            "print(t.schema.field('c').type, t.column('x').to_pylist())\n"
            "print(pa.Table.from_pandas(df, preserve_index=False).schema.field('c').type)\n")
    first, second = _printed(code)
    assert first.split()[-2:] == ["[1,", "2]"]
    assert first.startswith("string" if as_ingest else "dictionary<values=")
    assert second.startswith("dictionary<values=")   # pandas imported by then: recognised


def test_pandas_still_works_after_the_set_up(tmp_path):
    """In the ingest command's process, a later ``to_pandas`` imports pandas, and from then on
    pyarrow recognises pandas objects again (categoricals, series)."""
    code = (_AS_INGEST +
            "import pyarrow as pa\n"
            "assert 'pandas' not in sys.modules\n"
            "df = pa.table({'a': [1, 2]}).to_pandas()\n"
            "import pandas as pd\n"
            "assert isinstance(df, pd.DataFrame) and df.a.tolist() == [1, 2]\n"
            "print(pa.array(pd.Categorical(['x', 'y', 'x'])).type)\n"
            "print(pa.Table.from_pandas(pd.DataFrame({'c': pd.Categorical(['u'])})).schema.types)\n")
    lines = _printed(code)
    assert lines[0].startswith("dictionary<values=")
    assert "dictionary" in lines[1]
