"""A database URL's password never reaches the terminal: neither in the user part
(``postgresql://u:SECRET@h/db``) nor as libpq's ``password`` query parameter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SQEW = str(Path(sys.executable).with_name("sqew"))
SECRET = "Tr0ub4dor-and-3"
URLS = [
    f"postgresql+psycopg://someone:{SECRET}@127.0.0.1:1/nodb",
    f"postgresql://someone@127.0.0.1:1/nodb?sslmode=disable&password={SECRET}",
]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SQEW, *args], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


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
