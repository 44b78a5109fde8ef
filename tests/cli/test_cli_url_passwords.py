"""A database URL's secrets never reach the terminal or the log: neither the password in the
user part (``postgresql://u:SECRET@h/db``) nor any query parameter libpq treats as secret
(``password``, ``sslpassword``, ``oauth_client_secret``, however its name is percent-encoded)."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import cli_runs
import pytest

SECRET = "Tr0ub4dor-and-3"
URLS = [
    f"postgresql+psycopg://someone:{SECRET}@127.0.0.1:1/nodb",
    f"postgresql://someone@127.0.0.1:1/nodb?sslmode=disable&password={SECRET}",
    f"postgresql://someone@127.0.0.1:1/nodb?sslmode=disable&sslpassword={SECRET}",
    f"postgresql://someone@127.0.0.1:1/nodb?oauth_client_secret={SECRET}&sslmode=disable",
    f"postgresql://someone@127.0.0.1:1/nodb?ssl%70assword={SECRET}",
]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """``sqew args``, as every CLI test runs it (``cli_runs``)."""
    return cli_runs.completed(list(args), cwd=Path.cwd())


@pytest.mark.parametrize("url", URLS)
def test_print_config_hides_the_password(url: str) -> None:
    done = run("serve", "--db", url, "--print-config")
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout + done.stderr
    assert "***" in done.stdout


@pytest.mark.parametrize("url", URLS)
def test_a_database_that_cannot_be_reached_is_one_line_without_the_password(url: str) -> None:
    done = run("--db", url, "queue", "list")
    assert done.returncode == 1
    assert done.stderr.startswith("error: Unavailable: "), done.stderr
    assert SECRET not in done.stdout + done.stderr


def test_print_config_json_hides_every_secret_parameter() -> None:
    url = (f"postgresql://someone@127.0.0.1:1/nodb?sslpassword={SECRET}1&application_name=app"
           f"&oauth_client_secret={SECRET}2")
    done = run("--json", "serve", "--db", url, "--print-config")
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout + done.stderr
    shown = json.loads(done.stdout)["settings"]["db"]["value"]
    assert "sslpassword=***" in shown and "oauth_client_secret=***" in shown, shown
    assert "application_name=app" in shown, shown


@pytest.mark.postgres
def test_the_start_log_and_the_serving_line_hide_the_sslpassword(tmp_path: Path) -> None:
    import pg_support

    cluster = pg_support.cluster()
    name = cluster.new_database()
    url = cluster.url(name)
    url += ("&" if "?" in url else "?") + f"sslmode=disable&sslpassword={SECRET}"
    # PYTHONFAULTHANDLER: a server stuck on its way out is shown with its threads' stacks.
    proc = cli_runs.start(["serve", "--db", url, "--port", "0", "--log-format", "json"],
                          cwd=tmp_path, env=cli_runs.environment(PYTHONFAULTHANDLER="1"))
    try:
        assert proc.stdout is not None
        announced = proc.stdout.readline()
        assert announced.startswith("sqew serving on "), announced
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)  # every thread's stack on stderr, then it ends
            out, err = proc.communicate(timeout=30)
            pytest.fail(f"sqew serve did not stop within 30 s of SIGTERM:\n{err[-20000:]}")
        finally:
            proc.kill()  # by its PID, if it has not stopped (then the test fails above)
            proc.wait(30)
            cluster.drop(name)
    assert SECRET not in announced + out + err
    (start,) = [json.loads(line) for line in err.splitlines() if '"event":"start"' in line]
    assert "sslpassword=***" in start["db"], start
