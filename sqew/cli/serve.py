"""``sqew serve``, ``sqew health`` and ``sqew metrics``: run the REST server and ask it how it is.

``register(app)`` adds the three commands to the root app. The server package is imported only
inside ``serve``, so the other commands (and ``--help``) never load it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from sqew import errors
from sqew.cli import output, params
from sqew.cli.state import current
from sqew.settings import layering, report, serve_options


@serve_options.with_setting_options
def serve(
    ctx: typer.Context,
    config: Annotated[Path | None, typer.Option(
        "--config", metavar="FILE", help="TOML file of settings (env SQEW_CONFIG), one per line "
        "by name: `port = 8888`, `log_format = \"json\"`.",
    )] = None,
    print_config: Annotated[bool, typer.Option(
        "--print-config", help="Print the effective settings and where each came from "
        "(default, the file, a variable, an option), then exit without serving; with --json "
        "as JSON.")] = False,
    memory: Annotated[bool, typer.Option(
        "--memory", help="Keep the database in memory for this run only (for tests and "
        "development): nothing is kept once the server stops. Not with --db, nor with "
        "--workers above 1.")] = False,
    **settings: Any,
) -> None:
    """Serve the REST API until Ctrl-C or SIGTERM (in-flight requests finish first).

    Every setting comes from its default, a --config TOML file (or SQEW_CONFIG),
    a SQEW_* variable or its option below, the later winning. All problems are
    reported at once and nothing starts: exit 1 (2 for an option value of the
    wrong type). --print-config shows the result and where each value came from.
    Logs go to stderr (--log-format, --log-level, --access-log); the line
    "sqew serving on URL" to stdout once the socket listens.

    Examples:

        sqew serve --db ./sqew.db --port 8888 --log-format json --access-log

        sqew serve --memory --port 9324
    """
    flags = serve_options.given(settings)
    db = flags.get("db") or _root_db(ctx)
    if memory:
        if db:
            raise errors.ValidationError("--memory keeps the database in memory: give no --db "
                                         "with it")
        from sqew import scratch

        with scratch.database() as path:
            _serve(ctx, config, {**flags, "db": str(path)}, print_config, memory=True)
        return
    if db:
        flags["db"] = params.check_database(db)
    _serve(ctx, config, flags, print_config)


def _serve(ctx: typer.Context, config: Path | None, flags: dict[str, Any], print_config: bool,
           *, memory: bool = False) -> None:
    resolved = layering.resolve(config, flags=flags)
    if memory and resolved.settings.workers > 1:
        raise errors.ValidationError(
            f"--memory keeps the database in this one process: it cannot serve "
            f"{resolved.settings.workers} workers (give --workers 1)")
    if print_config:
        if current(ctx).json:
            output.write_json(report.as_data(resolved))
        else:
            typer.echo(report.as_text(resolved))
        return
    effective = resolved.settings
    if (effective.tls_cert is None) != (effective.tls_key is None):
        raise typer.BadParameter("give both --tls-cert and --tls-key (or SQEW_TLS_CERT and "
                                 "SQEW_TLS_KEY), or neither",
                                 param_hint="'--tls-cert' / '--tls-key'")
    from sqew.server import runner

    runner.run(effective, config_file=resolved.config_file)


def _root_db(ctx: typer.Context) -> str | None:
    """The global --db when given on the command line (``sqew --db x.db serve``)."""
    root = ctx.find_root()
    source = root.get_parameter_source("db")  # Typer's (vendored) Click ParameterSource
    if source is not None and source.name == "COMMANDLINE":
        value = root.params.get("db")
        return str(value) if value else None
    return None


def health(ctx: typer.Context) -> None:
    """Check that the server (--url) or the database (--db) answers.

    A --db file that does not exist is an error (health never creates one).

    Prints "ok" (or with --json the /healthz body) and exits 0; exits 1 with the error
    otherwise.

    Example:

        sqew --url http://127.0.0.1:8888 health
    """
    state = current(ctx)  # a database that is not there is unhealthy, not one to create
    result = state.client.health()
    output.emit(state, result, output.line(result.status))


def metrics(ctx: typer.Context) -> None:
    """Print metrics in the Prometheus text format.

    With --url: the server's GET /metrics (requests, database, queues). On a --db file: the
    queues' depths and counters read from it (a file that does not exist is an error).

    Examples:

        sqew --url http://127.0.0.1:8888 metrics

        sqew --db ./sqew.db metrics
    """
    state = current(ctx)
    typer.echo(state.client.metrics(), nl=False)


def register(app: typer.Typer) -> None:
    """Add ``serve``, ``health`` and ``metrics`` to the root ``sqew`` app."""
    app.command("serve")(serve)
    app.command("health")(health)
    app.command("metrics")(metrics)
