"""``forensics ingest``: logs, stats JSON and traces into a Parquet dataset."""
from __future__ import annotations

import contextlib
import sys

import click

from forensics.cli.process_setup import (imports_without_gc, one_blas_thread, started_as,
                                        system_arrow_pool)


def _lean_process() -> None:
    """Set up this process for an ingest, before numpy and pyarrow are imported: no OpenBLAS
    threads, Arrow's system memory pool, and pyarrow told there is no pandas (each unless
    already imported).

    OpenBLAS: :func:`~forensics.cli.process_setup.one_blas_thread` (an ingest does no linear
    algebra). The pool: :func:`~forensics.cli.process_setup.system_arrow_pool`.

    pyarrow asks once per process whether pandas is importable, on the first ``pa.array``,
    ``pa.table`` or ``pyarrow.dataset`` import, and importing it then costs ~0.3 s CPU that an
    ingest never uses: it builds Arrow arrays from numpy and lists only. The first question is
    answered "no" here by refusing the import for that one call. A later call that needs pandas
    (``to_pandas``, ``from_pandas``) asks again and imports it then, so nothing breaks (tested);
    at most a pandas object handed to ``pa.array`` before that could be read as a plain
    sequence, and this process makes none.
    """
    if not started_as("ingest"):
        return
    one_blas_thread()
    system_arrow_pool()
    if "pandas" in sys.modules or "pyarrow" in sys.modules:
        return

    class _Refuse:
        @staticmethod
        def find_spec(name: str, path: object = None, target: object = None) -> None:
            if name == "pandas" or name.startswith("pandas."):
                raise ImportError(f"{name}: not imported by an ingest")

    refuse = _Refuse()
    sys.meta_path.insert(0, refuse)
    try:
        import pyarrow as pa
        pa.array([0])
    finally:
        sys.meta_path.remove(refuse)


# The command's libraries with the collector off (``imports_without_gc``: ~0.02 s CPU of an
# ingest's start-up, measured), after the set-up above.
with imports_without_gc() if started_as("ingest") else contextlib.nullcontext():
    _lean_process()
    from forensics.cli.errors import BadInput, library_errors  # noqa: E402
    from forensics.cli.options import (Output, OutputPath, echo_json, json_option,  # noqa: E402
                                       quiet_option, terminal_text)
    from forensics.readers import ingest  # noqa: E402
    from forensics.readers.kinds import KINDS  # noqa: E402
    from forensics.report.summary import render_text  # noqa: E402


@click.command("ingest")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("-o", "--output", "output", required=True, type=OutputPath(replaced_beside=True),
              help="Dataset directory to write (replaced atomically if it exists).")
@click.option("--kind", type=click.Choice(KINDS), default=None,
              help="Read every input as this kind instead of detecting it per file.")
@json_option
@quiet_option
def command(inputs: tuple[str, ...], output: str, kind: str | None, as_json: bool,
            quiet: bool) -> None:
    """Ingest logs, iteration-stats JSON and traces into a dataset.

    INPUT is a file (plain, .gz or .zst) or a directory: every .log .txt .out .err .json .jsonl
    file below it (optionally .gz/.zst) is read. The kind of each file is detected from its
    content. A missing or binary input is refused (exit code 2) while the others are still
    ingested. Open the result with `forensics summary DATASET` or `forensics.load(DATASET)`.

    \b
    Example:
      forensics ingest logs/ iteration_stats.jsonl traces/run.jsonl.zst -o crash.ds
    """
    with library_errors():
        report = ingest(list(inputs), output, kind=kind, quiet=quiet or as_json)
    if as_json:
        echo_json({"path": str(report.path), "inputs": [i.to_json() for i in report.inputs],
                   "refused": [{"name": r.name, "reason": r.reason} for r in report.refused],
                   "skipped": [str(x) for x in report.skipped],
                   "summary": report.summary.to_dict()})
    else:
        out = Output(quiet)
        out.echo(f"ingested {len(report.inputs)} input(s) into {report.path}")
        out.echo(render_text(report.summary))
    if report.skipped and not quiet:
        click.echo(terminal_text(f"skipped {len(report.skipped)} unrecognised file(s) in "
                                 f"directories, e.g. {report.skipped[0]}"), err=True)
    if report.refused:
        # The dataset was written; exit code 2 still says some inputs were refused.
        raise BadInput("not ingested:\n" + "\n".join(f"  {r}" for r in report.refused),
                       json_printed=as_json)
