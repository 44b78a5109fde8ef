"""The CLI's one error table: how every failure becomes a stderr line and an exit status.

docs/cli.md: 0 success, 1 the operation failed (one line ``error: <Code>: <message>``; with
``--json`` the REST API's error envelope instead), 2 usage error (one line ``error: usage:
<message> (see `<command> --help`)``), 128 + its number when a signal stopped it
(``sqew.cli.interrupts``). Nothing internal (tracebacks, SQL, paths of sqew's own files)
reaches the user.
"""

from __future__ import annotations

import sys

import msgspec
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


def report(exc: errors.SqewError, as_json: bool = False) -> int:
    """Print ``exc`` as the error line of docs/cli.md on stderr (``as_json``: as the REST
    API's error envelope, ``{"error": {"code", "message", "details"?}}``, on one line);
    returns the exit status (1).

    Problems in the server settings are one block: the error line, then one indented line
    per problem (``sqew.config_layers.SettingsError``).
    """
    from sqew.config_layers import SettingsError

    if as_json:
        sys.stderr.buffer.write(_envelope(exc.to_dict()) + b"\n")
        sys.stderr.flush()
        return EXIT_FAILED
    if isinstance(exc, SettingsError):  # lines of their own, each escaped
        text = "\n".join(escape_controls(part) for part in
                         f"error: {exc.code}: {exc.message}".split("\n"))
    else:
        text = error_line(exc)
    sys.stderr.write(text + "\n")
    sys.stderr.flush()
    return EXIT_FAILED


def report_usage(exc: typer.TyperException) -> int:
    """Print a usage error as one line, ``error: usage: <message> (see `<command> --help`)``;
    returns its exit status (2 for usage errors)."""
    message = escape_controls(" ".join(str(exc.format_message()).split()))
    ctx = getattr(exc, "ctx", None)
    where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
    sys.stderr.write(f"error: usage: {message}{where}\n")
    sys.stderr.flush()
    return exc.exit_code


def unexpected(exc: BaseException) -> int:
    """An exception sqew did not expect: one InternalError line, no traceback."""
    kind = type(exc).__name__
    return report(errors.InternalError(f"unexpected {kind}: {exc}" if str(exc) else kind))


_envelope = msgspec.json.Encoder().encode
