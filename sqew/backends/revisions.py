"""The schema revision this code writes, and whether a database at another one may be opened.

Both backends open a database the same way: at ``SCHEMA_HEAD`` it is ready; with no sqew schema
it is created; at an older known revision it is migrated only when asked (``sqew db upgrade``,
or ``upgrade=True``); at a revision this code does not know it is refused untouched.
"""

from __future__ import annotations

from sqew import errors

SCHEMA_HEAD = "0010"
"""The Alembic head revision this code writes (a test keeps it equal to Alembic's head).

Known here so that opening an up-to-date database costs one query, without importing
SQLAlchemy's engine or Alembic (a CLI command starts in a fraction of the time).
"""


def check_known(rev: str, upgrade: bool) -> None:
    """Raise Unavailable unless a database at revision ``rev`` (not the head) may be migrated.

    Args:
        rev: the revision the database is at.
        upgrade: whether the caller asked to migrate an older database.

    Raises:
        sqew.errors.Unavailable: ``rev`` is unknown (newer than this code), or older and
            ``upgrade`` is off.
    """
    from sqew import migrate  # Alembic only when a schema must be checked

    if rev not in migrate.known_revisions():
        raise errors.Unavailable(
            f"the database schema ({rev}) is newer than this sqew knows; upgrade sqew"
        )
    if not upgrade:
        raise errors.Unavailable(
            f"the database schema ({rev}) is older than this sqew's ({SCHEMA_HEAD}); "
            "run `sqew db upgrade`"
        )
