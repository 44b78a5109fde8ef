"""``sqew db``: database maintenance."""

from __future__ import annotations

import typer

from sqew import errors, locations
from sqew.cli import output
from sqew.cli.state import current

app = typer.Typer(help="Database maintenance.", no_args_is_help=True)


@app.command("upgrade")
def upgrade(ctx: typer.Context) -> None:
    """Apply pending schema migrations to the --db database (creating it if missing).

    Prints the revision the database is at afterwards. Run it after upgrading sqew when
    sqew says the database schema is older than it knows.

    Example:

        sqew --db /var/lib/sqew/sqew.db db upgrade

        sqew --db postgresql+psycopg://sqew@db.internal:5432/sqew db upgrade
    """
    state = current(ctx)
    if state.url:
        raise errors.ValidationError(
            "db upgrade works on a database (--db); a server upgrades its own at start"
        )
    # Imported here: Alembic is slow to import and only this command needs it directly.
    from sqew import migrate
    from sqew.client.local import LocalClient

    LocalClient(state.db, upgrade=True).close()
    # Opening with upgrade=True either brings the schema to the newest revision or raises,
    # so the database is now at this sqew's head.
    revision = migrate.head()
    output.emit(state, {"revision": revision},
                output.line(f"database {locations.shown(state.db)} is at revision {revision}"))
