"""Turning library errors into click errors with the right exit code."""
from __future__ import annotations

import contextlib

import click

from forensics.errors import ForensicsError


class BadInput(click.ClickException):
    """Exit code 2: the input could not be used."""

    exit_code = 2


@contextlib.contextmanager
def library_errors():
    """Re-raise ``ForensicsError`` as a click error naming file and line, exit code 2."""
    try:
        yield
    except ForensicsError as e:
        raise BadInput(str(e)) from None
