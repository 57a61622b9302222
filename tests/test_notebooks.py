"""The example notebooks run without error against the bundled samples and are committed clean.

They are executed with nbclient in a kernel spec written for this interpreter into a temporary
directory (``JUPYTER_PATH`` points at it), so the test does not depend on a kernel installed in
the user's Jupyter directories.
"""
from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
#: Seconds a cell may take before the run fails (the slowest cell takes a few seconds).
CELL_TIMEOUT = 240


def test_there_are_notebooks():
    assert [p.name for p in NOTEBOOKS] == ["01-postmortem.ipynb", "02-fleet.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [], f"{path.name} cell {i} has outputs"
            assert cell.execution_count is None, f"{path.name} cell {i} has an execution count"


@pytest.fixture(scope="module")
def kernel_env(tmp_path_factory):
    """A ``python3`` kernel spec for this interpreter, first on ``JUPYTER_PATH``."""
    from ipykernel.kernelspec import install

    prefix = tmp_path_factory.mktemp("jupyter")
    install(kernel_name="python3", prefix=str(prefix))
    mp = pytest.MonkeyPatch()
    mp.setenv("JUPYTER_PATH", str(prefix / "share" / "jupyter"))
    mp.setenv("MPLBACKEND", "Agg")
    yield
    mp.undo()


#: Where each notebook is run: 01-postmortem from a directory outside the checkout, so it must
#: find the samples through the installed package, not the working directory (it used to stop
#: with a bare StopIteration); 02-fleet from its own directory.
ELSEWHERE = {"01-postmortem.ipynb"}


#: Smaller sizes a notebook is run with here (each text must occur once in the notebook): the
#: same cells on fewer simulated runs. 02-fleet's sweep keeps every grid axis and both policies
#: but two of the rank counts and one seed of shorter runs: 48 runs of 120 iterations (144 runs
#: of 250 iterations took about a minute of CPU; 72 of 120, ~9 s).
SMALLER = {"02-fleet.ipynb": [('"ranks": [4, 8, 16],', '"ranks": [4, 8],'),
                              ('"seeds": 2,', '"seeds": 1,'), ('"iters": 250,', '"iters": 120,'),
                              ("iters=250,", "iters=120,")]}


def _smaller(nb, name: str):
    for old, new in SMALLER.get(name, ()):
        cells = [c for c in nb.cells if c.cell_type == "code" and old in c.source]
        assert len(cells) == 1 and cells[0].source.count(old) == 1, f"{name}: {old!r} not found once"
        cells[0].source = cells[0].source.replace(old, new)
    return nb


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, kernel_env, tmp_path):
    """Every cell runs and a figure is drawn; 01-postmortem, run from elsewhere, also shows the
    ReplayResult's short repr (one run of it checks both: it was run twice, once per check)."""
    nb = _smaller(nbformat.read(path, as_version=4), path.name)
    where = path.parent
    if path.name in ELSEWHERE:
        where = tmp_path / "elsewhere"
        where.mkdir()
    client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3",
                                     resources={"metadata": {"path": str(where)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert not errors
    shown = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
             if o.output_type in ("display_data", "execute_result") and "image/png" in o.get("data", {})]
    assert shown, f"{path.name} drew no figure"
    if path.name == "01-postmortem.ipynb":
        # The ReplayResult cell shows the short repr, not thousands of characters.
        res = [o for c in nb.cells if c.cell_type == "code" and c.source.strip().endswith("\nres")
               for o in c.outputs if o.output_type == "execute_result"]
        assert res and len(res[0]["data"]["text/plain"]) < 300
