"""``sqew serve``, ``sqew health`` and ``sqew metrics``: run the REST server and ask it how it is.

``register(app)`` adds the three commands to the root app. The server package is imported only
inside ``serve``, so the other commands (and ``--help``) never load it.
"""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from sqew import errors, locations
from sqew.cli import output, params
from sqew.cli.state import current


class Durability(StrEnum):
    """SQLite synchronous level."""

    normal = "normal"
    full = "full"


def serve(
    ctx: typer.Context,
    host: Annotated[str | None, typer.Option(
        "--host", metavar="HOST", help="Interface to listen on. [default: 127.0.0.1]")] = None,
    port: Annotated[int | None, typer.Option(
        "--port", metavar="PORT", help="TCP port; 0 picks a free one. [default: 8888]")] = None,
    db: Annotated[str | None, typer.Option(
        "--db", metavar="PATH", help="Database file or URL. [default: ./sqew.db]")] = None,
    workers: Annotated[int | None, typer.Option(
        "--workers", metavar="N", help="Server processes sharing the database. [default: 1]",
    )] = None,
    config: Annotated[Path | None, typer.Option(
        "--config", metavar="FILE", help="TOML file of settings (env SQEW_CONFIG).")] = None,
    durability: Annotated[Durability | None, typer.Option(
        "--durability", help="normal: safe if the process crashes; full: also on power loss. "
        "[default: normal]")] = None,
    tls_cert: Annotated[str | None, typer.Option(
        "--tls-cert", metavar="FILE",
        help="Serve HTTPS with this PEM certificate (chain); needs --tls-key.")] = None,
    tls_key: Annotated[str | None, typer.Option(
        "--tls-key", metavar="FILE", help="The PEM private key of --tls-cert.")] = None,
    insecure: Annotated[bool, typer.Option(
        "--insecure", help="Serve beyond loopback (--host) with no API key: open to anyone who "
        "can reach it. Without it, sqew serve refuses to; mint a key instead (sqew keys create "
        "--scope admin).")] = False,
) -> None:
    """Serve the REST API until Ctrl-C or SIGTERM (in-flight requests finish first).

    Settings come from defaults, then a --config TOML file, then SQEW_* variables (SQEW_HOST,
    SQEW_PORT, SQEW_DB, SQEW_WORKERS, SQEW_DURABILITY, ...), then these options.
    With --tls-cert and --tls-key (SQEW_TLS_CERT, SQEW_TLS_KEY) it serves HTTPS.

    Example:

        sqew serve --db ./sqew.db --host 127.0.0.1 --port 8888
    """
    from sqew.config import Settings
    from sqew.server import runner

    db = db or _root_db(ctx)
    if db:
        params.check_database(db)
    settings = Settings.load(
        config, host=host, port=port, db=db, workers=workers,
        durability=durability.value if durability else None, tls_cert=tls_cert, tls_key=tls_key,
        insecure=insecure or None,
    )
    if (settings.tls_cert is None) != (settings.tls_key is None):
        raise typer.BadParameter("give both --tls-cert and --tls-key (or SQEW_TLS_CERT and "
                                 "SQEW_TLS_KEY), or neither",
                                 param_hint="'--tls-cert' / '--tls-key'")
    runner.run(settings)


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
    state = current(ctx)
    if not state.url:  # a database that is not there is unhealthy, not one to create
        path = locations.sqlite_path(state.db)
        if path is not None and not os.path.exists(path):
            raise errors.Unavailable(f"no database at '{state.db}' (health creates none)")
    result = state.client.health()
    output.emit(state.json, result, output.line(result.status))


def metrics(ctx: typer.Context) -> None:
    """Print metrics in the Prometheus text format.

    With --url: the server's GET /metrics (requests, database, queues). On a --db file: the
    queues' depths and counters read from it (a file that does not exist is an error).

    Examples:

        sqew --url http://127.0.0.1:8888 metrics

        sqew --db ./sqew.db metrics
    """
    state = current(ctx)
    if not state.url:  # reading metrics creates no database
        path = locations.sqlite_path(state.db)
        if path is not None and not os.path.exists(path):
            raise errors.Unavailable(f"no database at '{state.db}' (metrics creates none)")
    typer.echo(state.client.metrics(), nl=False)


def register(app: typer.Typer) -> None:
    """Add ``serve``, ``health`` and ``metrics`` to the root ``sqew`` app."""
    app.command("serve")(serve)
    app.command("health")(health)
    app.command("metrics")(metrics)
