"""``:name`` statements for drivers of DB-API paramstyle ``pyformat`` (``%(name)s``: psycopg).

``SqlTx``'s statements are written once, with ``:name`` parameters (sqlite3's ``named``); a
``SqlTx`` subclass with ``PARAMSTYLE = "pyformat"`` runs them through ``PyformatConnection``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

# A :name parameter: not part of a PostgreSQL cast (::type), not inside a quoted string or
# identifier (those alternatives are matched first and kept as they are).
_PARAM_OR_QUOTED = re.compile(r"""'(?:[^']|'')*'|"(?:[^"]|"")*"|::|(?<!\w):([A-Za-z_]\w*)|%""")


@functools.lru_cache(maxsize=4096)
def pyformat(sql: str) -> str:
    """``sql`` with its ``:name`` parameters written ``%(name)s`` (and ``%`` as ``%%``).

    Quoted strings and identifiers and PostgreSQL's ``::`` casts are left alone. Cached: a
    statement is converted once.
    """

    def convert(m: re.Match[str]) -> str:
        text = m.group(0)
        if text == "%":
            return "%%"
        if m.group(1) is not None:
            return f"%({m.group(1)})s"
        return text

    return _PARAM_OR_QUOTED.sub(convert, sql)


class PyformatConnection:
    """Runs ``:name`` statements on a driver of paramstyle ``pyformat`` (psycopg).

    Each statement is converted by ``pyformat`` (cached: once per statement text).
    """

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Any = None) -> Any:
        """Execute one statement; the driver's cursor."""
        if params is None:  # no parameters: a driver takes the text as it is
            return self.conn.execute(sql)
        return self.conn.execute(pyformat(sql), params)

    def executemany(self, sql: str, rows: Sequence[Any]) -> Any:
        """Execute one statement for each row of parameters (on a cursor where the
        connection has no ``executemany``: psycopg 3's)."""
        run = getattr(self.conn, "executemany", None)
        if run is None:
            cursor = self.conn.cursor()
            cursor.executemany(pyformat(sql), rows)
            return cursor
        return run(pyformat(sql), rows)
