"""The CLI's one error table: how every failure becomes a stderr line and an exit status.

docs/cli.md: 0 success, 1 the operation failed (one line ``error: <Code>: <message>``), 2
usage error, 128 + its number when a signal stopped it (``sqew.cli.interrupts``). Nothing
internal (tracebacks, SQL, paths of sqew's own files) reaches the user.
"""

from __future__ import annotations

import sys

import typer

from sqew import errors
from sqew.cli import interrupts
from sqew.escapes import escape_controls

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = interrupts.EXIT_INTERRUPTED  # 130: 128 + SIGINT, what shells report


def error_line(exc: errors.SqewError) -> str:
    """``error: <Code>: <message>`` on one line (newlines in a message are folded, other
    control characters escaped: a message may quote what a client or a server sent)."""
    message = escape_controls(" ".join(str(exc.message).split()))
    return f"error: {exc.code}: {message}"


def report(exc: errors.SqewError) -> int:
    """Print ``exc`` as the error line of docs/cli.md on stderr; returns the exit status (1).

    Problems in the server settings are one block: the error line, then one indented line
    per problem (``sqew.config_layers.SettingsError``).
    """
    from sqew.config_layers import SettingsError

    if isinstance(exc, SettingsError):  # lines of their own, each escaped
        text = "\n".join(escape_controls(part) for part in
                         f"error: {exc.code}: {exc.message}".split("\n"))
    else:
        text = error_line(exc)
    sys.stderr.write(text + "\n")
    sys.stderr.flush()
    return EXIT_FAILED


def report_usage(exc: typer.TyperException) -> int:
    """Print a usage error the way Typer does; returns its exit status (2 for usage errors)."""
    try:
        from typer import rich_utils

        rich_utils.rich_format_error(exc)  # type: ignore[arg-type]
    except Exception:  # a plain line rather than fail while failing
        sys.stderr.write(f"Error: {exc.format_message()}\n")
    return exc.exit_code


def unexpected(exc: BaseException) -> int:
    """An exception sqew did not expect: one InternalError line, no traceback."""
    kind = type(exc).__name__
    return report(errors.InternalError(f"unexpected {kind}: {exc}" if str(exc) else kind))
