"""docs/openapi.yaml is the app's own document, and the live server keeps its promises.

The drift test regenerates the document from the app; every route has an explicit operation
id. Then schemathesis — the installed ``st`` command, as a user would run it — sends generated
requests for every operation to a live server on 127.0.0.1, with every check it has and in
every phase (examples, coverage, fuzzing, stateful): no answer may be a 5xx, every answer must
match the document (status, headers, content type, body), a request the document calls valid
must be accepted and one it calls invalid refused, an undocumented method answered 405 with
an ``Allow`` that lists the documented ones, … Zero failures.

Twice: with keys on (the server requires keys, the run sends an admin key, and the checks
also send requests without it or with a wrong one), and with keys off (a server on a database
that never had a key: every key is optional there, which the run's copy of the document says).
The generation is deterministic (``--generation-deterministic``), so a run is repeatable.

A schema-valid request may still be refused where the rule relates a value to another field, a
header or the queue's stored settings, which JSON Schema cannot express: each operation's
description names those rules, and ``schemathesis_hooks.py`` drops a "schema-valid request
rejected" failure only when the answer is such a documented refusal (and the one documented
leniency: an ``hmac_secret`` counts bytes, which ``minLength`` cannot).

``SQEW_ST_MAX_EXAMPLES`` sizes the runs (docs/development.md): the default keeps each near a
minute; a larger number is a longer fuzz.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from auth_support import mint
from openapi_support import keys_optional
from targets import ServerThread, server_settings

from sqew.server import openapi
from sqew.server.app import create_app
from sqew.server.openapi import generate

ST = Path(sys.executable).with_name("st")
HOOKS = Path(__file__).with_name("schemathesis_hooks.py")
PHASES = "examples,coverage,fuzzing,stateful"
MAX_EXAMPLES = int(os.environ.get("SQEW_ST_MAX_EXAMPLES", "10"))
"""Fuzzing cases per operation and stateful scenarios (``st --max-examples``). The coverage
phase adds its own, about 1,400 a run whatever this is; each step of this adds about 30.
The suite's default keeps a run near a minute; docs/development.md says how to fuzz longer."""
MIN_CASES = 1000 + 10 * MAX_EXAMPLES
"""The generated cases each run must at least make: fewer means the run tested less than it
should (an operation skipped, a phase that did not run)."""
RUN_TIMEOUT_S = 300 + 20 * MAX_EXAMPLES
"""A guard against a hung run, generous for a loaded machine (a run is a minute or two)."""


def test_the_document_is_up_to_date() -> None:
    assert generate.main(["--check"]) == 0, "run `python -m sqew.server.openapi`"


def test_the_generator_answers_help_and_refuses_unknown_options_writing_nothing(
        tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQEW_")}
    for argv, status in ((["--help"], 0), (["--bogus"], 2)):
        done = subprocess.run([sys.executable, "-m", "sqew.server.openapi", *argv], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == status, done.stderr
        assert "usage: python -m sqew.server.openapi" in done.stdout + done.stderr
    assert list(tmp_path.iterdir()) == []


def test_every_route_is_documented_with_an_explicit_operation_id() -> None:
    app = create_app()
    doc = yaml.safe_load(openapi.DEFAULT_PATH.read_text())
    documented = {
        (path, method.upper()): op["operationId"]
        for path, item in doc["paths"].items() for method, op in item.items()
    }
    for route in app.routes:
        for handler in getattr(route, "route_handlers", []):
            if not handler.resolve_include_in_schema():
                continue
            assert isinstance(handler.operation_id, str), handler  # explicit, not generated
            for method in handler.http_methods:
                path = route.path_format
                assert documented.get((path, method)) == handler.operation_id, (path, method)
    assert len(documented) == 29  # docs/rest.md


@pytest.fixture(params=["on", "off"], ids=["keys-on", "keys-off"])
def keys(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def server(keys: str, tmp_path: Path) -> Iterator[tuple[ServerThread, dict[str, str], str]]:
    """A live server, the headers of the run and the id of its key (if any).

    With keys on, the database holds an admin key and the server requires keys, with no limit
    on failed attempts (the checks send requests without a key or with a wrong one, which
    would use up this address's allowance).
    """
    db = tmp_path / "sqew.db"
    if keys == "on":
        key = mint(db, "admin")
        settings = server_settings(db, require_auth=True, auth_failures_per_minute=0)
        headers, key_id = {"Authorization": f"Bearer {key.key}"}, key.id
    else:
        settings = server_settings(db)
        headers, key_id = {}, ""
    thread = ServerThread(settings)
    yield thread, headers, key_id
    thread.stop()


@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_schemathesis_finds_nothing(
    keys: str, server: tuple[ServerThread, dict[str, str], str], tmp_path: Path
) -> None:
    thread, headers, key_id = server
    document = yaml.safe_load(openapi.DEFAULT_PATH.read_text())
    if keys == "off":
        document = keys_optional(document)
    schema_path = tmp_path / "openapi.yaml"
    schema_path.write_text(yaml.safe_dump(document, sort_keys=False, allow_unicode=True))
    config = tmp_path / "schemathesis.toml"
    config.write_text(toml_config(headers))
    args = [str(ST), "--config-file", str(config), "run", str(schema_path),
            "--url", thread.url, "--checks", "all", "--phases", PHASES,
            "--max-examples", str(MAX_EXAMPLES), "--generation-deterministic",
            "--workers", "1", "--no-color",
            "--report", "json", "--report-json-path", str(tmp_path / "report.json")]
    if keys == "off":
        # Minting a key ends keys-off: the database then holds one, and the server requires
        # keys from then on (docs/security.md). The keys-on run covers POST /keys.
        args += ["--exclude-operation-id", "createKey"]
    # A stream's answer never ends while the server runs, so a fuzzed request would wait
    # out every timeout: its answers are tested in tests/stream/test_stream_http.py.
    args += ["--exclude-operation-id", "streamMessages"]
    refusals = tmp_path / "refusals.txt"
    env = {**os.environ, "SQEW_ST_KEY_ID": key_id, "SQEW_ST_REFUSALS": str(refusals)}
    done = subprocess.run(args, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                          env=env, cwd=tmp_path, check=False)
    noted = refusals.read_text().splitlines() if refusals.exists() else []
    output = (done.stdout[-20000:] + done.stderr[-5000:] + "\ndocumented refusals:\n"
              + "\n".join(f"{n} x {line}" for line, n in Counter(noted).most_common()))
    assert (tmp_path / "report.json").exists(), output
    report: dict[str, Any] = json.loads((tmp_path / "report.json").read_text())
    assert report["failures"] == [], output
    assert report["errors"] == [], output
    assert done.returncode == 0, output
    assert report["test_cases"]["generated"] >= MIN_CASES, output


def toml_config(headers: dict[str, str]) -> str:
    """The run's schemathesis.toml: the hooks, the headers every request sends."""
    lines = [f"hooks = {json.dumps(str(HOOKS))}"]
    if headers:
        pairs = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in headers.items())
        lines.append(f"headers = {{ {pairs} }}")
    return "\n".join(lines) + "\n"
