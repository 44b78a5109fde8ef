"""What the ratio suites (``bench/async_client.py``, ``bench/worker.py``) share: the machine's
figures, a target's verdict, and the command line that runs one and prints its rates and
targets (exit status 1 when a target is missed)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqew


def machine(load_before: float) -> dict[str, Any]:
    """The machine a run ran on, with its load average before and now."""
    return {"cpus": os.cpu_count(), "python": sys.version.split()[0], "sqew": sqew.__version__,
            "load_before": load_before, "load_after": os.getloadavg()[0]}


def target(name: str, ratio: float, wanted: float) -> dict[str, Any]:
    """A target's verdict: ``ratio`` at least ``wanted``."""
    return {"name": name, "ratio": ratio, "target": wanted, "pass": ratio >= wanted}


def main(argv: list[str] | None, *, suite: str, doc: str | None, quick: str,
         run: Callable[[bool], dict[str, Any]]) -> int:
    """``python -m bench SUITE [--quick] [--json FILE]``: ``run(quick)``, then its rates and
    targets printed; 1 if a target is missed."""
    parser = argparse.ArgumentParser(prog=f"scripts/bench {suite}", description=doc)
    parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args, other = parser.parse_known_args(argv)
    if other:
        print(f"{suite}: ignoring options of other suites: {' '.join(other)}", flush=True)
    result = run(args.quick)
    m = result["machine"]
    print()
    print(f"{m['cpus']} cores, Python {m['python']}, sqew {m['sqew']}; load average "
          f"{m['load_before']:.2f} before, {m['load_after']:.2f} after")
    for where, rates in result["rates"].items():
        print(f"{where}: " + ", ".join(f"{s} {r:,.0f} msg/s" for s, r in rates.items()))
    for t in result["targets"]:
        print(f"{t['name']}: {t['ratio']:.2f} (target >= {t['target']})"
              f"{'' if t['pass'] else '  MISSED'}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0 if all(t["pass"] for t in result["targets"]) else 1
