"""``python -m bench [suite ...] [options]``: run benchmark suites (default: all).

Suites: ``embedded`` (sqew's Client against raw sqlite3, and against the embedded peers
persist-queue and litequeue), ``server`` (the REST server against its own /healthz ceiling and
moto's SQS server), ``spark`` (the data source against the CLI's bulk paths) and ``postgres``
(sqew on PostgreSQL against plain psycopg on the same server, 1 and 2 server replicas).
Run only when named: ``pg-variants`` (what each of sqew's PostgreSQL statement variants buys:
sqew against sqew with that variant off, ``bench/pg_variants.py``) and ``relay`` (``sqew.Relay``
to a local receiver against a plain httpx POST loop, ``bench/relay.py``), ``sqs`` (boto3
against sqew's SQS endpoint, its REST API and moto's server, ``bench/sqs.py``) and
``async-client`` (``sqew.AsyncClient`` against ``sqew.Client`` on a file and over HTTP,
``bench/async_client.py``) and ``worker`` (``sqew.Worker`` against a poll+ack loop,
``bench/worker.py``).
Options after the suite names go to each suite (``--quick``, ``--json FILE``: with several
suites, one file per suite, ``FILE.<suite>.json``). Exit status 1 if a target is missed.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

SUITES = ("embedded", "server", "spark", "postgres")
NAMED_ONLY = ("pg-variants", "relay", "sqs", "async-client", "worker")
"""Suites that run only when named (not part of "all")."""


def main(argv: list[str]) -> int:
    """Run the suites named in ``argv`` (all when none is), passing them the other arguments."""
    known = (*SUITES, *NAMED_ONLY)
    if any(a in ("-h", "--help") for a in argv) and not any(a in known for a in argv):
        print(__doc__)
        return 0
    names = [a for a in argv if a in known] or list(SUITES)
    rest = [a for a in argv if a not in known]
    status = 0
    for name in names:
        print(f"== {name}", flush=True)
        suite = importlib.import_module(f"bench.{name.replace('-', '_')}")
        status |= suite.main(_json_per_suite(rest, name) if len(names) > 1 else rest)
    return status


def _json_per_suite(argv: list[str], suite: str) -> list[str]:
    """With several suites, ``--json out.json`` becomes ``out.<suite>.json`` for each."""
    out = list(argv)
    for i, arg in enumerate(out):
        if arg == "--json" and i + 1 < len(out):
            out[i + 1] = str(Path(out[i + 1]).with_suffix(f".{suite}.json"))
        elif arg.startswith("--json="):
            out[i] = "--json=" + str(Path(arg[7:]).with_suffix(f".{suite}.json"))
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
