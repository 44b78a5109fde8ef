"""The root ``sqew`` command: global options, command registration and the exit-status contract.

Each command group lives in its own module (``queue.py``, ``message.py``, …) as a Typer app and
is registered in ``_register`` below; a new group (``keys``, ``serve``, …) is one import and one
line there. ``main`` runs the app in Click's non-standalone mode so that this module alone maps
outcomes to exit statuses (see ``sqew.cli.errors``).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Sequence
from typing import Annotated, Any, TextIO
from urllib.parse import urlsplit

import typer
import typer.core
import typer.main

from sqew import __version__, errors
from sqew.cli import debug_log, interrupts, params
from sqew.cli import errors as cli_errors
from sqew.cli.state import State

HELP = """sqew: a lightweight, reliable at-least-once message queue.

Works on a local database file (--db, the default ./sqew.db) or a sqew server (--url).
Global options go before or after the command: `sqew --json queue list` or
`sqew queue list --json`.

Example:

    sqew queue add --name jobs && sqew message enqueue --queue jobs --payload '{"n": 1}'
"""

HELP_OPTIONS = ("-h", "--help")

app = typer.Typer(
    name="sqew",
    help=HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,  # errors are reported by main(), never as tracebacks
    context_settings={"help_option_names": list(HELP_OPTIONS)},
)


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"sqew {__version__}")
        raise typer.Exit()


def _check_url(value: str | None) -> str | None:
    if not value:
        return None
    try:  # urlsplit raises on an unclosed "[" of an IPv6 host; .port on a port over 65535
        parts = urlsplit(value)
        usable = value.startswith(("http://", "https://")) and bool(parts.hostname)
        _ = parts.port
    except ValueError:
        usable = False
    if not usable:
        raise typer.BadParameter(f"expected an http:// or https:// URL with a host, got '{value}'")
    return value


@app.callback()
def root(
    ctx: typer.Context,
    db: Annotated[
        str,
        typer.Option("--db", envvar="SQEW_DB", metavar="PATH",
                     help="Database for local mode: a file path, a sqlite:/// URL, or a "
                     "postgresql+psycopg:// (or postgresql://) URL."),
    ] = "sqew.db",
    url: Annotated[
        str | None,
        typer.Option("--url", envvar="SQEW_URL", metavar="URL", callback=_check_url,
                     help="Talk to a sqew server instead of a local file."),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option("--api-key", envvar="SQEW_API_KEY", metavar="KEY",
                     help="API key for --url (sent as a Bearer token)."),
    ] = None,
    hmac_secret: Annotated[
        str | None,
        typer.Option("--hmac-secret", envvar="SQEW_HMAC_SECRET", metavar="SECRET",
                     show_default=False,
                     help="Sign enqueues over --url (and sqew relay's deliveries) with "
                          "this secret (the queue's hmac_secret); never printed."),
    ] = None,
    ca_cert: Annotated[
        str | None,
        typer.Option("--ca-cert", envvar="SQEW_CA_CERT", metavar="FILE",
                     help="Verify an https:// --url against this CA certificate (PEM) "
                     "instead of the system's."),
    ] = None,
    json_: Annotated[
        bool,
        typer.Option("--json", envvar="SQEW_JSON",
                     help="Print the JSON the REST API returns for the same call."),
    ] = False,
    wide: Annotated[
        bool,
        typer.Option("--wide", envvar="SQEW_WIDE",
                     help="Print tables whole, however wide: no cell is cut to the "
                     "terminal's width."),
    ] = False,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_show_version, is_eager=True,
                     help="Print the version and exit."),
    ] = False,
) -> None:
    debug_log.from_env()
    if url:
        url = _choose_url(ctx, url)
    if not url:
        params.check_database(db)
    state = State(db=db, url=url, api_key=api_key, json=json_, ca_cert=ca_cert, wide=wide)
    state.hmac_secret = hmac_secret or None
    if isinstance(ctx.obj, list):  # run's: how an error of the command is to be printed
        ctx.obj.append(state)
    ctx.obj = state
    ctx.call_on_close(state.close)


def _choose_url(ctx: typer.Context, url: str) -> str | None:
    """The server to talk to, or None for the database file, given where each option came from.

    The command line wins over the environment: ``sqew --db other.db …`` works on that file
    even with ``SQEW_URL`` exported. ``--db`` and ``--url`` both on the command line contradict
    each other (a usage error); from the environment alone, ``SQEW_URL`` wins over ``SQEW_DB``.
    """
    db_source, url_source = (_source(ctx, "db"), _source(ctx, "url"))
    if db_source == "COMMANDLINE":
        if url_source == "COMMANDLINE":
            raise typer.BadParameter(
                "give --db (a database file) or --url (a server), not both",
                param_hint="'--db' / '--url'",
            )
        return None  # --db given, SQEW_URL only from the environment
    return url


def _source(ctx: typer.Context, name: str) -> str | None:
    # Typer's vendored Click ParameterSource, compared by name (as serve.py does).
    source = ctx.get_parameter_source(name)
    return source.name if source is not None else None


def _register() -> None:
    # Imported here, after `app` exists, because each module registers into it.
    from sqew.cli import db, dlq, keys, message, queue, relay, serve, stats, worker

    app.add_typer(db.app, name="db")
    app.add_typer(queue.app, name="queue")
    app.add_typer(message.app, name="message")
    app.add_typer(dlq.app, name="dlq")
    app.command("stats")(stats.stats)
    app.add_typer(keys.app, name="keys")
    serve.register(app)
    app.command("worker")(worker.worker)
    app.command("relay")(relay.relay)


_register()

# --- global options anywhere ---------------------------------------------------------------------
_GLOBAL_FLAGS = frozenset({"--json", "--wide"})
_GLOBAL_VALUED = frozenset({"--db", "--url", "--api-key", "--hmac-secret", "--ca-cert"})


# Commands are Click-style objects (Typer vendors Click privately), so they are read by duck
# typing: `params` with `opts`/`secondary_opts`/`is_flag`/`count`, groups with `commands`.
def _option(command: Any, name: str) -> Any:
    for param in command.params:
        if name in (*param.opts, *getattr(param, "secondary_opts", ())):
            return param
    return None


def _takes_value(command: Any, name: str) -> bool:
    param = _option(command, name)
    if param is None or not name.startswith("-"):
        return False
    return not (getattr(param, "is_flag", False) or getattr(param, "count", False))


def hoist_globals(root_command: Any, args: Sequence[str]) -> list[str]:
    """Move global options written after a command (``sqew queue list --json``) before it.

    Click only parses a group's options before the subcommand name; users write them anywhere.
    Values of the command's own options are skipped (``--payload --json`` stays a payload),
    and an option the command itself defines (``serve --db``) stays with the command.
    """
    out: list[str] = []
    hoisted: list[str] = []
    insert_at: int | None = None  # where the first subcommand name is in `out`
    command = root_command
    i = 0
    while i < len(args):
        token = args[i]
        if token == "--":
            out.extend(args[i:])
            break
        name = token.split("=", 1)[0]
        if token.startswith("-") and token != "-":
            is_global = name in _GLOBAL_FLAGS or name in _GLOBAL_VALUED
            target = out
            if is_global and command is not root_command and _option(command, name) is None:
                target = hoisted
            target.append(token)
            valued = name in _GLOBAL_VALUED if target is hoisted else _takes_value(command, name)
            if target is hoisted and valued and "=" not in token and i + 1 == len(args):
                # `sqew keys list --api-key` with no value: hoisted before `keys`, it would take
                # `keys` as its value. Left last at the top, Click says it needs an argument.
                return [*out[:insert_at], *hoisted]
            if valued and "=" not in token and i + 1 < len(args):
                target.append(args[i + 1])
                i += 1
        else:
            subcommands = getattr(command, "commands", {})
            if token in subcommands:
                if insert_at is None:
                    insert_at = len(out)
                command = subcommands[token]
            out.append(token)
        i += 1
    if hoisted and insert_at is not None:
        out[insert_at:insert_at] = hoisted
    return out


def _no_flag_metavars(command: Any) -> None:
    """Show no ``<bool>`` type beside flags (``--json``, ``--archive/--no-archive``, ``--help``).

    Typer's rich help prints every option's type, flags included, where a flag takes no value;
    an empty metavar leaves that column blank. The help option is made (and cached by the
    command) here, with the names the app gives it.
    """
    context = command.context_class(command, help_option_names=list(HELP_OPTIONS))
    help_option = command.get_help_option(context)
    for param in [*command.params, *([help_option] if help_option is not None else [])]:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    for sub in getattr(command, "commands", {}).values():
        _no_flag_metavars(sub)


# --- entry point ---------------------------------------------------------------------------------
@functools.cache
def click_command() -> typer.core.TyperGroup:
    """The Click command ``run`` parses ``argv`` with, built from ``app`` once per process.

    Typer builds it from every command's signature (evaluating their annotations): most of
    the CPU a short command spends in sqew's own code. A process that forks ``sqew`` runs
    (the tests' fork server) builds it before forking."""
    command = typer.main.get_command(app)
    _no_flag_metavars(command)
    assert isinstance(command, typer.core.TyperGroup)
    return command


def run(argv: Sequence[str] | None = None) -> int:
    """Run ``sqew`` with ``argv`` (default: the process's) and return its exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    states: list[State] = []  # the root callback's, once the global options are parsed
    try:
        command = click_command()
        result = command.main(
            args=hoist_globals(command, args), prog_name="sqew", standalone_mode=False,
            obj=states,
        )
    except errors.SqewError as exc:
        return cli_errors.report(exc, as_json=bool(states) and states[0].json)
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        return cli_errors.EXIT_FAILED
    except typer.TyperException as exc:  # usage errors: Click's exceptions derive from it
        return cli_errors.report_usage(exc)
    except interrupts.Terminated:
        return interrupts.EXIT_TERMINATED
    except KeyboardInterrupt:
        return cli_errors.EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader went away: stop quietly
        _reader_gone(sys.stdout)
        return cli_errors.EXIT_FAILED
    except Exception as exc:
        return cli_errors.unexpected(exc)
    return result if isinstance(result, int) else cli_errors.EXIT_OK


def main(argv: Sequence[str] | None = None) -> None:
    """Run ``sqew`` as the process (``sqew.cli.main`` calls it): exit with its status.

    While the command runs, Ctrl-C raises ``KeyboardInterrupt`` (``run`` makes it 130); before
    and after, it ends the process at once with 130 (``sqew.cli.interrupts``).
    """
    ours = interrupts.take_over()
    try:
        with interrupts.raising(ours):
            status = run(argv)
    except interrupts.Terminated:  # one that came just outside run's own handlers
        status = interrupts.EXIT_TERMINATED
    except KeyboardInterrupt:
        status = cli_errors.EXIT_INTERRUPTED
    if status == cli_errors.EXIT_INTERRUPTED and interrupts.terminated_in_event_loop():
        status = interrupts.EXIT_TERMINATED  # a SIGTERM unwound as asyncio unwinds Ctrl-C
    sys.exit(_flushed(status))


def _flushed(status: int) -> int:
    """Write out stdout and stderr now, not at the interpreter's exit; ``status``, or 1 if
    the reader of one went away."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except BrokenPipeError:
            _reader_gone(stream)
            status = status or cli_errors.EXIT_FAILED
        except (OSError, ValueError):  # closed: nothing more can be written anyway
            pass
    return status


def _reader_gone(stream: TextIO) -> None:
    """The reader of ``stream`` went away (``sqew queue peek | head``): point it at
    /dev/null, so that no later flush (the interpreter's own at exit) can complain."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
