"""Every CLI command has ``--help`` with an example, opens no database (nor server) for it,
and is documented in docs/cli.md; the README's quick start runs as written."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import typer.main

from sqew.cli import app, run

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
CLI_DOCS = ROOT / "docs" / "cli.md"


def command_paths() -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """(groups, leaf commands) of the sqew app, as argument tuples."""
    groups: list[tuple[str, ...]] = []
    leaves: list[tuple[str, ...]] = []

    def walk(command: object, path: tuple[str, ...]) -> None:
        subcommands = getattr(command, "commands", None)
        if subcommands is None:
            leaves.append(path)
            return
        groups.append(path)
        for name, sub in subcommands.items():
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return groups, leaves


def test_the_commands_of_spec_section_3_exist() -> None:
    _, leaves = command_paths()
    expected = {
        ("db", "upgrade"), ("stats",),
        *(("queue", c) for c in ("list", "add", "update", "rm", "show", "purge", "peek",
                                 "requeue-dlq", "compact", "export")),
        *(("message", c) for c in ("enqueue", "get", "poll", "ack", "nack", "extend-lease",
                                   "peek", "remove", "tail")),
        *(("dlq", c) for c in ("list", "purge", "requeue")),
    }
    assert expected <= set(leaves)


def test_help_works_without_opening_a_database_or_a_server(local_sqew, tmp_path) -> None:
    # Through the binary: the root, a group, a command, and a command given a dead --url.
    env = {"SQEW_DB": str(tmp_path / "never.db")}
    runs = [("--help",), ("queue", "--help"), ("message", "enqueue", "--help"),
            ("--url", "http://127.0.0.1:9", "message", "poll", "--help")]
    for result in local_sqew.many(runs, env=env, use_db=False):
        assert result.returncode == 0, str(result)
        assert "Usage:" in result.stdout and result.stderr == "", str(result)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_every_command_has_help_with_an_example(tmp_path, monkeypatch, capsys) -> None:
    # In-process (the same entry point the binary calls), to keep this sweep fast.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SQEW_DB", str(tmp_path / "never.db"))
    monkeypatch.setenv("COLUMNS", "120")
    _, leaves = command_paths()
    for path in leaves:
        status = run([*path, "--help"])
        out = capsys.readouterr().out
        assert status == 0 and "Usage:" in out, (path, status, out)
        assert "Example" in out, f"`sqew {' '.join(path)} --help` has no example"
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_every_command_is_in_the_cli_reference() -> None:
    text = CLI_DOCS.read_text()
    _, leaves = command_paths()
    missing = [" ".join(p) for p in leaves if f"sqew {' '.join(p)}" not in text]
    assert not missing, f"commands missing from docs/cli.md: {missing}"


def blocks(text: str, lang: str) -> list[str]:
    """The fenced code blocks of ``text`` in language ``lang``."""
    return re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.S | re.M)


def test_the_readme_quick_start_uses_only_real_commands() -> None:
    _, leaves = command_paths()
    used = []
    for block in blocks(README.read_text(), "sh"):
        for line in block.splitlines():
            if not line.startswith("sqew "):
                continue
            words = shlex.split(line.split("#", 1)[0].replace("…", ""))[1:]
            while words and words[0].startswith("--"):  # global options and their values
                words = words[2:] if words[0] in ("--db", "--url", "--api-key") else words[1:]
            path = tuple(w for w in words[:2] if not w.startswith("-"))
            used.append(path if path in leaves else (*path, "(not a command)"))
    assert len(used) >= 5 and all(p in leaves for p in used), used


def test_the_readme_python_runs_as_written_after_its_curl_session(
    start_server: Callable[..., Any], tmp_path: Path
) -> None:
    # The README's order: a server on ./sqew.db, its curl session (made here with httpx),
    # then the Python snippet, unchanged, in the same directory.
    server = start_server(db=str(tmp_path / "sqew.db"))
    with httpx.Client(base_url=server.url, timeout=30) as http:
        assert http.post("/queues", json={"name": "jobs", "max_attempts": 3}).status_code == 201
        http.post("/queues/jobs/messages", json={"payload": {"order": 42}, "priority": 5})
        (m,) = http.post("/queues/jobs/poll", params={"batch": 10}).json()["messages"]
        acked = http.post("/queues/jobs/ack", json={"id": m["id"], "token": m["token"]})
        assert acked.json() == {"results": [{"id": m["id"], "status": "acked"}]}
    (snippet,) = blocks(README.read_text(), "python")
    result = subprocess.run([sys.executable, "-c", snippet], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "{'report': 7} 1" in result.stdout, result.stdout
