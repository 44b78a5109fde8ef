"""``scripts/chaos fuzz``: the long fuzz runs, each against a real process.

- **schemathesis** (the installed ``st``, every check, every phase) against a ``sqew serve``
  on a fresh file, with keys on (the server requires keys; the run sends an admin key, and
  the checks also send none or a wrong one), then with keys off (a database that never had a
  key). The suite's own short runs (``tests/server/test_openapi.py``) share the document
  adjustments and the hooks used here (``tests/server/schemathesis_hooks.py``); this
  form sizes ``--max-examples`` for at least ``MIN_CASES`` generated requests a run.
- **hypothesis** (``tests/fuzz``: the CLI's arguments, NDJSON files, REST batch bodies) with
  ``SQEW_FUZZ_EXAMPLES`` examples of each property.

Figures per run: cases generated, failures (and errors), answers with a 5xx status.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

from chaos.procs import ROOT, SQEW_BIN, Server, child_env
from chaos.suite import from_tests

ST_BIN = Path(sys.executable).with_name("st")
HOOKS = ROOT / "tests" / "server" / "schemathesis_hooks.py"
DOCUMENT = ROOT / "docs" / "openapi.yaml"
PHASES = "examples,coverage,fuzzing,stateful"
MAX_EXAMPLES = 150
"""``st --max-examples``: the coverage phase makes about 1,400 cases a run whatever this is,
and each step of this about 30 more (docs/development.md): 150 makes more than 5,000."""
MIN_CASES = 5000
HYPOTHESIS_EXAMPLES = 1000
ST_TIMEOUT_S = 3600.0


@dataclass
class Figures:
    """One fuzz run's outcome."""

    name: str
    cases: int
    failures: int
    server_errors: int  # answers with a 5xx status (0 for the hypothesis runs: no server)
    ok: bool
    detail: str = ""
    unit: str = "cases"  # the hypothesis runs count the examples they were asked for

    def line(self) -> str:
        """The run's figures on one line."""
        verdict = "ok" if self.ok else "FAILED"
        return (f"== {self.name}: {verdict}: {self.cases:,} {self.unit}, {self.failures} failures, "
                f"{self.server_errors} answers 5xx")


def schemathesis_run(base: Path, keys: bool, max_examples: int = MAX_EXAMPLES,
                     min_cases: int = MIN_CASES) -> Figures:
    """``st run`` against a ``sqew serve`` of its own in ``base``, keys on or off."""
    base.mkdir(parents=True, exist_ok=True)
    db = base / "sqew.db"
    document: dict[str, Any] = yaml.safe_load(DOCUMENT.read_text())
    headers, key_id, extra = {}, "", []
    if keys:
        created = subprocess.run(
            [str(SQEW_BIN), "--db", str(db), "--json", "keys", "create", "--scope", "admin",
             "--name", "fuzz"], capture_output=True, text=True, env=child_env(), check=True)
        key = json.loads(created.stdout)
        headers, key_id = {"Authorization": f"Bearer {key['key']}"}, str(key["id"])
        extra = ["--require-auth", "--auth-failures-per-minute", "0"]
    else:
        document = from_tests("openapi_support").keys_optional(document)
    schema = base / "openapi.yaml"
    schema.write_text(yaml.safe_dump(document, sort_keys=False, allow_unicode=True))
    config = base / "schemathesis.toml"
    lines = [f"hooks = {json.dumps(str(HOOKS))}"]
    if headers:
        pairs = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in headers.items())
        lines.append(f"headers = {{ {pairs} }}")
    config.write_text("\n".join(lines) + "\n")
    statuses, report = base / "statuses.txt", base / "report.json"
    server = Server(str(db), base / "serve.log", args=extra)
    server.start()
    try:
        args = [str(ST_BIN), "--config-file", str(config), "run", str(schema),
                "--url", server.url, "--checks", "all", "--phases", PHASES,
                "--max-examples", str(max_examples), "--generation-deterministic",
                "--workers", "1", "--no-color",
                "--report", "json", "--report-json-path", str(report)]
        if not keys:  # minting a key would turn keys on (the keys-on run covers POST /keys)
            args += ["--exclude-operation-id", "createKey"]
        env = {**os.environ, "SQEW_ST_KEY_ID": key_id, "SQEW_ST_STATUSES": str(statuses),
               "SQEW_ST_REFUSALS": str(base / "refusals.txt")}
        done = subprocess.run(args, capture_output=True, text=True, timeout=ST_TIMEOUT_S,
                              env=env, cwd=base, check=False)
    finally:
        server.kill()
    (base / "st.log").write_text(done.stdout + done.stderr)
    counts = Counter(statuses.read_text().split()) if statuses.exists() else Counter()
    server_errors = sum(n for status, n in counts.items() if status.startswith("5"))
    name = f"schemathesis keys {'on' if keys else 'off'}"
    if not report.exists():
        return Figures(name, 0, 1, server_errors, False, done.stdout[-3000:] + done.stderr[-2000:])
    figures: dict[str, Any] = json.loads(report.read_text())
    cases = int(figures["test_cases"]["generated"])
    failures = len(figures["failures"]) + len(figures["errors"])
    ok = (failures == 0 and server_errors == 0 and done.returncode == 0
          and cases >= min_cases)
    detail = "" if ok else done.stdout[-6000:] + done.stderr[-2000:]
    return Figures(name, cases, failures, server_errors, ok, detail)


def hypothesis_run(base: Path, examples: int = HYPOTHESIS_EXAMPLES) -> Figures:
    """``pytest tests/fuzz`` with ``examples`` examples of each property."""
    base.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SQEW_FUZZ_EXAMPLES": str(examples)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "-q",
         "--timeout", str(int(ST_TIMEOUT_S)), str(ROOT / "tests" / "fuzz")],
        capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    (base / "pytest.log").write_text(done.stdout + done.stderr)
    tests = len(list((ROOT / "tests" / "fuzz").glob("test_*.py")))
    failures = 0 if done.returncode == 0 else max(1, done.stdout.count("FAILED "))
    return Figures("hypothesis tests/fuzz", examples * tests, failures, 0,
                   done.returncode == 0, "" if done.returncode == 0 else done.stdout[-6000:],
                   unit="examples")


def run(base: Path, max_examples: int = MAX_EXAMPLES, min_cases: int = MIN_CASES,
        examples: int = HYPOTHESIS_EXAMPLES) -> list[Figures]:
    """Every fuzz run, one after another; each prints its figures as it ends."""
    results = []
    steps: tuple[Callable[[], Figures], ...] = (
        lambda: schemathesis_run(base / "keys-on", True, max_examples, min_cases),
        lambda: schemathesis_run(base / "keys-off", False, max_examples, min_cases),
        lambda: hypothesis_run(base / "hypothesis", examples))
    for step in steps:
        figures = step()
        print(figures.line(), flush=True)
        if figures.detail:
            print(figures.detail, flush=True)
        results.append(figures)
    return results
