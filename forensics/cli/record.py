"""``forensics record``: switch trace recording in live TensorRT-LLM processes on and off."""
from __future__ import annotations

import click

from forensics.cli.errors import library_errors
from forensics.cli.options import Output, echo_json, json_option, quiet_option, terminal_text
from forensics.record import install as _install

_SITE_DIR = click.option("--site-dir", type=click.Path(file_okay=False), default=None,
                         help="site-packages directory to use (default: this Python's purelib).")


@click.group("record")
def command() -> None:
    """Record request-state traces from a live executor.

    Traces follow traces/FORMAT.md; the executor's code is not changed.

    \b
    Example:
      forensics record install
      ADP_FORENSICS_TRACE_DIR=/tmp/adp trtllm-serve ...   # every rank writes rank-<r>.jsonl
      forensics ingest /tmp/adp -o run.ds
    """


@command.command("install")
@_SITE_DIR
@json_option
@quiet_option
def install_cmd(site_dir: str | None, as_json: bool, quiet: bool) -> None:
    """Write the .pth hook into site-packages.

    The hook is inert while ADP_FORENSICS_TRACE_DIR is unset.

    Example: forensics record install --site-dir .venv/lib/python3.11/site-packages
    """
    with library_errors():
        path = _install.install(site_dir)
    if as_json:
        echo_json({"installed": True, "pth_path": str(path)})
        return
    out = Output(quiet)
    out.echo(f"installed {path}")
    out.echo("record with: ADP_FORENSICS_TRACE_DIR=DIR <your trtllm command>")


@command.command("uninstall")
@_SITE_DIR
@json_option
@quiet_option
def uninstall_cmd(site_dir: str | None, as_json: bool, quiet: bool) -> None:
    """Remove the .pth hook.

    Example: forensics record uninstall
    """
    with library_errors():
        path = _install.uninstall(site_dir)
    if as_json:
        echo_json({"removed": None if path is None else str(path)})
        return
    Output(quiet).echo(f"removed {path}" if path is not None else "not installed; nothing to remove")


@command.command("status")
@_SITE_DIR
@json_option
@quiet_option
def status_cmd(site_dir: str | None, as_json: bool, quiet: bool) -> None:
    """Say whether the hook is installed and recording is on.

    Example: forensics record status
    """
    st = _install.status(site_dir)
    if as_json:
        echo_json({"pth_path": str(st.pth_path), "installed": st.installed, "current": st.current,
                   "recording": bool(st.trace_dir), "trace_dir": st.trace_dir})
        return
    if quiet:
        return
    if not st.installed:
        click.echo(terminal_text(f"not installed ({st.pth_path} absent); run: forensics record install"))
    elif not st.current:
        click.echo(terminal_text(f"installed but outdated: {st.pth_path}; run: forensics record install"))
    else:
        click.echo(terminal_text(f"installed: {st.pth_path}"))
    if st.trace_dir:
        click.echo(terminal_text(f"recording: on, traces go to {st.trace_dir}"))
    else:
        click.echo("recording: off (set ADP_FORENSICS_TRACE_DIR to switch it on)")
