"""``python -m chaos SCENARIO|all [--minutes N | --long] [--json FILE] [--dir DIR]``.

Runs each scenario (workload, faults, checker) and prints its figures; ``--list`` names the
scenarios. Exit status 1 if the checker found any violation, 2 on a usage error.
``python -m chaos fuzz`` runs the long fuzz (``chaos.fuzz``) and ``python -m chaos soak`` the
soak (``chaos.soak``); ``all`` runs neither.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from chaos import fuzz, pg, report, soak
from chaos.scenarios import SCENARIOS

SHORT_S = 3.0
"""The short form: a few seconds, a few faults (what the test suite runs)."""
LONG_MINUTES = 3.0
SOAK_MINUTES = 1.0
"""The soak without a length; ``--long`` runs it ``SOAK_LONG_MINUTES``."""
SOAK_LONG_MINUTES = 30.0


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(prog="scripts/chaos", description=__doc__.split("\n\n")[0])
    p.add_argument("scenario", nargs="?", help="a scenario's name, or all")
    p.add_argument("--list", action="store_true", help="name the scenarios and stop")
    p.add_argument("--minutes", type=float, help="run each scenario this long")
    p.add_argument("--long", action="store_true", help=f"run each {LONG_MINUTES:g} minutes")
    p.add_argument("--seconds", type=float, help="run each scenario this long (seconds)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", type=Path, help="write the figures as JSON to this file")
    p.add_argument("--dir", type=Path, help="keep the run's files (db, journals, logs) here")
    p.add_argument("--max-examples", type=int, default=fuzz.MAX_EXAMPLES,
                   help="fuzz: schemathesis's --max-examples")
    p.add_argument("--examples", type=int, default=fuzz.HYPOTHESIS_EXAMPLES,
                   help="fuzz: examples of each hypothesis property of tests/fuzz")
    p.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite",
                   help="soak: the database")
    p.add_argument("--plots", type=Path, help="soak: write the CSV, JSON and PNGs here")
    p.add_argument("--sample-s", type=float, default=soak.SAMPLE_S, help="soak: sample period")
    p.add_argument("--rate", type=float, default=soak.RATE,
                   help="soak: cycles per second of each client")
    return p.parse_args(argv)


def seconds_of(args: argparse.Namespace) -> float:
    """How long each scenario runs."""
    if args.seconds is not None:
        return float(args.seconds)
    if args.minutes is not None:
        return float(args.minutes) * 60
    return LONG_MINUTES * 60 if args.long else SHORT_S


def main(argv: list[str]) -> int:
    """Run the scenarios named; 1 if any violation was found."""
    args = parse(argv)
    if args.list:
        for s in SCENARIOS.values():
            print(f"{s.name:<15} {s.doc}")
        print(f"{'fuzz':<15} schemathesis (keys on, off) and tests/fuzz, long (not in all)")
        print(f"{'soak':<15} a fixed-rate mixed load, sampled and plotted (not in all)")
        return 0
    if args.scenario == "fuzz":
        return run_fuzz(args)
    if args.scenario == "soak":
        return run_soak(args)
    if args.scenario is None or (args.scenario != "all" and args.scenario not in SCENARIOS):
        print(f"error: name a scenario ({', '.join(SCENARIOS)}) or all", file=sys.stderr)
        return 2
    names = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    base = args.dir or Path(tempfile.mkdtemp(prefix="sqew-chaos-"))
    results, status = [], 0
    for name in names:
        scenario = SCENARIOS[name]
        if scenario.backend == "postgres" and (reason := pg.unavailable()) is not None:
            print(f"== {name}: skipped: PostgreSQL cannot run here: {reason}", flush=True)
            status |= 1 if args.scenario == name else 0
            continue
        if scenario.unavailable is not None and (reason := scenario.unavailable()) is not None:
            print(f"== {name}: skipped: {reason}", flush=True)
            status |= 1 if args.scenario == name else 0
            continue
        began = time.monotonic()
        run, summary = scenario.run(base / name, seconds_of(args), args.seed)
        took = time.monotonic() - began
        print("\n".join(report.lines(summary, took, run.notes)), flush=True)
        results.append(report.as_json(summary, took, run.notes))
        status |= 0 if summary.ok else 1
    print(report.dumps(results))
    if args.json:
        args.json.write_text(report.dumps(results))
    if args.dir is None and status == 0:
        shutil.rmtree(base, ignore_errors=True)
    elif status:
        print(f"the run's files are kept in {base}", file=sys.stderr)
    return status


def run_soak(args: argparse.Namespace) -> int:
    """The soak; 1 if a series grew beyond the tolerance."""
    if args.seconds is not None or args.minutes is not None:
        minutes = seconds_of(args) / 60
    else:
        minutes = SOAK_LONG_MINUTES if args.long else SOAK_MINUTES
    base = args.dir or Path(tempfile.mkdtemp(prefix="sqew-soak-"))
    status = soak.run(base, minutes, args.backend, args.plots, args.sample_s, args.rate)
    if args.dir is None and args.plots is not None:
        shutil.rmtree(base, ignore_errors=True)
    else:
        print(f"the run's files are in {base}", file=sys.stderr)
    return status


def run_fuzz(args: argparse.Namespace) -> int:
    """The long fuzz runs; 1 if any found a failure."""
    base = args.dir or Path(tempfile.mkdtemp(prefix="sqew-fuzz-"))
    results = fuzz.run(base, args.max_examples, fuzz.MIN_CASES if args.max_examples
                       >= fuzz.MAX_EXAMPLES else 0, args.examples)
    if args.json:
        args.json.write_text(report.dumps([vars(r) for r in results]))
    if all(r.ok for r in results):
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)
        return 0
    print(f"the run's files are kept in {base}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
