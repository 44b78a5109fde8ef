"""``python -m bench [suite ...] [options]``: run benchmark suites (default: all).

Suites: ``embedded`` (sqew's Client against raw sqlite3, issue #3) and ``server`` (the REST
server against its own /healthz ceiling and moto's SQS server, issue #4). Options after the
suite names go to each suite (``--quick``, ``--json FILE``). Exit status 1 if a target is missed.
"""

from __future__ import annotations

import importlib
import sys

SUITES = ("embedded", "server")


def main(argv: list[str]) -> int:
    """Run the suites named in ``argv`` (all when none is), passing them the other arguments."""
    if any(a in ("-h", "--help") for a in argv) and not any(a in SUITES for a in argv):
        print(__doc__)
        return 0
    names = [a for a in argv if a in SUITES] or list(SUITES)
    rest = [a for a in argv if a not in SUITES]
    status = 0
    for name in names:
        print(f"== {name}", flush=True)
        suite = importlib.import_module(f"bench.{name}")
        status |= suite.main(rest)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
