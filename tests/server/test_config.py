"""``sqew serve``'s settings: a TOML file ← ``SQEW_*`` variables ← options, through the binary.

- precedence, shown by ``--print-config`` (value and source of each setting) and obeyed by a
  running server; ``SQEW_CONFIG`` names the file unless ``--config`` does;
- ``--print-config`` binds nothing and opens nothing;
- every problem of every source in one block (exit 1), an option of the wrong type a usage
  error (exit 2), a key given twice named;
- every setting has an option and a variable in ``--help``, a description, and a row in
  docs/cli.md's table.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path
from typing import Any

import cli_runs
import httpx

from sqew.settings.docs_table import TABLE_BEGIN, TABLE_END, markdown_table
from sqew.settings.fields import FIELDS

from .support import serve

ROOT = Path(__file__).resolve().parents[2]
RUN_S = 60


def sqew(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
         ) -> subprocess.CompletedProcess[str]:
    """``sqew`` in a subprocess, with no ``SQEW_*`` of the test process."""
    return cli_runs.completed(args, cwd=cwd or os.getcwd(),
                              env=cli_runs.environment(**(env or {})))


def printed(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.returncode == 0 and result.stderr == "", result
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_a_flag_beats_a_variable_which_beats_the_file(tmp_path: Path) -> None:
    config = tmp_path / "sqew.toml"
    config.write_text('port = 1111\nmax_body_bytes = 1000\nlog-level = "debug"\n'
                      "access_log = true\nheader_timeout_s = 3\n")
    env = {"SQEW_PORT": "2222", "SQEW_MAX_BODY_BYTES": "2000", "SQEW_LOG_LEVEL": "warning"}
    data = printed(sqew("--json", "serve", "--config", str(config), "--port", "3333",
                        "--log-level", "error", "--print-config", env=env, cwd=tmp_path))
    got = {name: (s["value"], s["source"], s["where"]) for name, s in data["settings"].items()}
    assert got["port"] == (3333, "flag", "--port")
    assert got["log_level"] == ("error", "flag", "--log-level")
    assert got["max_body_bytes"] == (2000, "env", "SQEW_MAX_BODY_BYTES")
    assert got["access_log"] == (True, "file", f"{config}:access_log")
    assert got["header_timeout_s"] == (3.0, "file", f"{config}:header_timeout_s")
    assert got["threads"] == (32, "default", None)
    assert set(got) == {f.name for f in FIELDS}
    assert (data["config_file"], data["config_from"]) == (str(config), "--config")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sqew.toml"]  # no database made
    # SQEW_CONFIG names a file when --config does not; --config wins over it.
    other = tmp_path / "other.toml"
    other.write_text("port = 4444\n")
    by_env = printed(sqew("serve", "--print-config", "--json", cwd=tmp_path,
                          env={"SQEW_CONFIG": str(config)}))
    assert by_env["settings"]["port"]["value"] == 1111 and by_env["config_from"] == "SQEW_CONFIG"
    by_flag = printed(sqew("serve", "--config", str(other), "--print-config", "--json",
                           cwd=tmp_path, env={"SQEW_CONFIG": str(config)}))
    assert by_flag["settings"]["port"]["value"] == 4444
    assert by_flag["settings"]["max_body_bytes"]["source"] == "default"


def test_a_running_server_obeys_the_layers(tmp_path: Path) -> None:
    config = tmp_path / "sqew.toml"
    config.write_text('max_body_bytes = 1000\naccess_log = true\nlog_format = "text"\n')
    with serve(tmp_path / "l.db", "--config", str(config), "--log-format", "json",
               env={"SQEW_MAX_BODY_BYTES": "3000"}) as server, \
            httpx.Client(base_url=server.url, timeout=30) as http:
        http.post("/queues", json={"name": "q"})
        assert http.post("/queues/q/messages",
                         json={"payload": "x" * 2000}).status_code == 201  # env over file
        assert http.post("/queues/q/messages", json={"payload": "x" * 4000}).status_code == 413
        assert server.stop() == 0
        lines = server.stderr().splitlines()
    logged = [json.loads(line) for line in lines]  # JSON: the option over the file's text
    assert len([r for r in logged if r.get("event") == "request"]) == 3  # the file's access log
    start = next(r for r in logged if r.get("event") == "start")
    assert start["config_file"] == str(config)


def test_print_config_shows_each_source_and_binds_nothing(tmp_path: Path) -> None:
    config = tmp_path / "s.toml"
    config.write_text("workers = 2\n")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = sqew("serve", "--config", str(config), "--port", str(port), "--db",
                      str(tmp_path / "never.db"), "--print-config", cwd=tmp_path,
                      env={"SQEW_ACCESS_LOG": "yes"})
    assert result.returncode == 0 and result.stderr == "", result
    rows = {line.split()[0]: line.split()[1:] for line in result.stdout.splitlines()[1:]}
    assert result.stdout.splitlines()[0] == f"config file: {config} (from --config)"
    assert rows["port"] == [str(port), "--port"]
    assert rows["workers"] == ["2", f"{config}:workers"]
    assert rows["access_log"] == ["true", "SQEW_ACCESS_LOG"]
    assert rows["durability"] == ["normal", "default"]
    assert rows["tls_cert"] == ["none", "default"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.toml"]


def test_every_problem_is_reported_at_once_and_nothing_starts(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('port = "8888"\nprot = 1\nmax-body-bytes = 10\nmax_body_bytes = 11\n'
                      'workers = 0\nlog_format = "yaml"\n[server]\nhost = "0.0.0.0"\n')
    env = {"SQEW_THREADS": "many", "SQEW_GRACEFUL_TIMEOUT_S": "-1", "SQEW_GROUP_COMMIT": "maybe"}
    db = tmp_path / "never.db"
    result = sqew("serve", "--config", str(config), "--db", str(db), "--max-json-depth", "300",
                  env=env, cwd=tmp_path)
    assert result.returncode == 1, result
    assert result.stdout == "" and not db.exists()
    assert result.stderr.splitlines() == [
        "error: ValidationError: 10 problems in the server settings:",
        f"  {config}:port: must be an integer between 0 and 65535, got '8888'",
        f"  {config}:prot: unknown setting (did you mean port?)",
        f"  {config}:max_body_bytes: the setting max_body_bytes is given twice, as "
        "max-body-bytes and as max_body_bytes",
        f"  {config}:workers: must be an integer ≥ 1, got 0",
        f"  {config}:log_format: must be one of auto, json, text, got 'yaml'",
        f"  {config}:server: unknown setting (the file holds settings at its top level, with "
        "no tables)",
        "  SQEW_THREADS: must be an integer ≥ 1, got 'many'",
        "  SQEW_GROUP_COMMIT: must be true or false, got 'maybe'",
        "  SQEW_GRACEFUL_TIMEOUT_S: must be a number ≥ 0, got '-1'",
        "  --max-json-depth: must be an integer between 1 and 256, got 300",
    ]


def test_a_key_given_twice_is_named_and_a_missing_file_said_so(tmp_path: Path) -> None:
    twice = tmp_path / "twice.toml"
    twice.write_text('port = 1\nhost = "127.0.0.1"\nport = 2')
    result = sqew("serve", "--config", str(twice), "--print-config")
    assert result.returncode == 1 and result.stderr.splitlines() == [
        "error: ValidationError: 1 problem in the server settings:",
        f"  {twice}:port: given twice (lines 1, 3); TOML allows a key once"], result
    missing = tmp_path / "missing.toml"
    result = sqew("serve", "--config", str(missing), "--port", "-1")
    assert result.returncode == 1 and result.stderr.splitlines()[1:] == [
        f"  {missing}: cannot read the config file: No such file or directory",
        "  --port: must be an integer between 0 and 65535, got -1"], result


def test_an_option_of_the_wrong_type_is_a_usage_error(tmp_path: Path) -> None:
    for args in (["--port", "eighty"], ["--log-format", "yaml"], ["--workers", "1.5"]):
        result = sqew("serve", "--db", str(tmp_path / "never.db"), *args, cwd=tmp_path)
        assert result.returncode == 2, result
        assert args[0] in result.stderr and "Traceback" not in result.stderr, result
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_help_shows_every_setting_with_its_option_and_variable() -> None:
    result = sqew("serve", "--help", env={"COLUMNS": "250"})
    assert result.returncode == 0, result
    words = " ".join(result.stdout.replace("│", " ").split())
    for f in FIELDS:
        assert f.flag in words and f"Env: {f.env}." in words, f.name
        assert f"Default: {f.default_text}." in words, f.name
    for spec in ("--host", "--port", "--db", "--workers", "--config", "--durability",
                 "--tls-cert", "--tls-key", "--insecure", "--log-format", "--log-level",
                 "--print-config"):  # docs/cli.md's options, by their names
        assert spec in words


def test_every_setting_is_described_and_in_the_cli_reference() -> None:
    assert [f.name for f in FIELDS if not f.description] == []
    document = (ROOT / "docs" / "cli.md").read_text()
    block = document.split(TABLE_BEGIN, 1)[1].split(TABLE_END, 1)[0].strip()
    assert block == markdown_table(), (
        "docs/cli.md's settings table is stale: "
        "run `python -m sqew.settings.docs_table docs/cli.md`")
