"""The dependency rule of docs/architecture.md ("The dependency rule"), checked on the source's
import statements.

What it states, encoded here:
- ``core/`` and ``backends/`` (the queue engine) know nothing of HTTP or the CLI: they never
  import litestar, httpx, typer, rich, uvicorn, nor sqew's transports (``sqew.server``,
  ``sqew.cli``) or clients (``sqew.client``) — not even inside a function.
- ``errors`` and ``models`` are the bottom layer: they import no sqew module but each other.
- ``client ← cli``: the CLI reaches the engine through a Client, never ``sqew.core`` or
  ``sqew.backends`` directly (transports are thin).
- ``client ← worker``: the Worker reaches the engine through a Client only, as the CLI does.
- ``core ← server``: the server never imports the CLI.
- ``core ← sqs ← server``: the SQS adapter calls the core and imports no web framework, no
  backend; nothing below the server imports it.
- "The CLI imports ``server`` only inside ``serve``": only ``sqew/cli/serve.py`` imports
  ``sqew.server``, and only inside a function (so ``sqew --help`` never loads the web stack);
  likewise only ``sqew/cli/relay.py`` imports ``sqew.relay``, inside a function (so a command
  on a database never loads httpx).
- ``telemetry`` (traces) is used by the core, the clients and the server alike, so it sits just
  above ``models``: it imports no sqew module but ``errors`` and ``models``, and nothing of
  HTTP or the CLI; the core reaches OpenTelemetry through its API only (never the SDK, an
  optional extra that only a server sets up, through ``telemetry``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

import sqew

PACKAGE = Path(sqew.__file__).parent
ENGINE_FORBIDDEN = (
    "litestar", "httpx", "typer", "rich", "uvicorn", "sqew.server", "sqew.cli", "sqew.client",
)


@dataclass(frozen=True)
class Import:
    """One imported module name, where it appears, and whether at module level.

    ``stem`` marks the ``a`` of ``from a import b`` (also recorded as ``a.b``): ``from sqew
    import errors`` names sqew.errors, not the whole package.
    """

    module: str
    line: int
    top_level: bool
    stem: bool = False


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> list[Import]:
    """Every module a file imports (relative imports resolved; ``from a import b`` gives a.b)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module_name(path)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    top = {id(node) for node in tree.body}
    # An import nested in an `if`/`try` at module level still runs on import: count it as top
    # level; an `if TYPE_CHECKING:` body never runs (only its `else`).
    for node in tree.body:
        if isinstance(node, ast.If) and _type_checking(node.test):
            top.update(id(n) for branch in node.orelse for n in ast.walk(branch))
        elif isinstance(node, ast.If | ast.Try):
            top.update(id(n) for n in ast.walk(node))
    found: list[Import] = []
    for node in ast.walk(tree):
        at_top = id(node) in top
        if isinstance(node, ast.Import):
            found += [Import(alias.name, node.lineno, at_top) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod == "__future__":
                continue
            found.append(Import(mod, node.lineno, at_top, stem=True))
            found += [Import(f"{mod}.{alias.name}", node.lineno, at_top) for alias in node.names]
    return found


def _type_checking(test: ast.expr) -> bool:
    """Whether an ``if`` tests ``TYPE_CHECKING`` (or ``typing.TYPE_CHECKING``)."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def is_under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def sources(*subdirs: str) -> list[Path]:
    files: list[Path] = []
    for sub in subdirs:
        target = PACKAGE / sub
        files += [target] if target.suffix == ".py" else sorted(target.rglob("*.py"))
    return files


def violations(files: list[Path], forbidden: tuple[str, ...]) -> list[str]:
    return [
        f"{f.relative_to(PACKAGE.parent)}:{imp.line} imports {imp.module}"
        for f in files
        for imp in imports_of(f)
        if any(is_under(imp.module, bad) for bad in forbidden)
    ]


def test_the_sources_exist() -> None:
    # Guards against a rule passing vacuously because a directory moved.
    for sub in ("core", "backends", "cli", "server", "errors.py", "models", "telemetry.py"):
        assert sources(sub), f"sqew/{sub} not found"
    assert any(i.module == "litestar" for f in sources("server") for i in imports_of(f))


@pytest.mark.parametrize("layer", ["core", "backends"])
def test_the_engine_knows_nothing_of_http_or_the_cli(layer: str) -> None:
    assert violations(sources(layer), ENGINE_FORBIDDEN) == []


@pytest.mark.parametrize("leaf", ["errors.py", "models"])
def test_errors_and_models_import_no_sqew_module_but_each_other(leaf: str) -> None:
    # models is a package: its modules import each other and errors, nothing else of sqew.
    bad = [
        f"{f.relative_to(PACKAGE.parent)}:{imp.line}: {imp.module}"
        for f in sources(leaf)
        for imp in imports_of(f)
        if is_under(imp.module, "sqew") and not is_under(imp.module, "sqew.models")
        and imp.module != "sqew.errors" and not (imp.stem and imp.module == "sqew")
    ]
    assert bad == []


def test_telemetry_sits_on_models_and_the_engine_uses_only_the_opentelemetry_api() -> None:
    allowed = {"sqew.errors", "sqew.models"}
    telemetry = sources("telemetry.py")
    bad = [
        f"line {imp.line}: {imp.module}"
        for imp in imports_of(telemetry[0])
        if is_under(imp.module, "sqew") and imp.module not in allowed
        and not (imp.stem and imp.module == "sqew")
    ]
    assert bad == []
    assert violations(telemetry, ENGINE_FORBIDDEN) == []
    assert violations(sources("core", "backends"), ("opentelemetry.sdk",)) == []


def test_the_cli_reaches_the_engine_only_through_a_client() -> None:
    assert violations(sources("cli"), ("sqew.core", "sqew.backends")) == []


def test_the_worker_reaches_the_engine_only_through_a_client() -> None:
    # client <- worker: like the CLI, it works the same on a file, PostgreSQL or a server.
    assert sources("worker")
    forbidden = ("sqew.core", "sqew.backends", "sqew.server", "sqew.cli", "litestar", "typer")
    assert violations(sources("worker"), forbidden) == []


def test_the_sqs_adapter_sits_on_the_core_and_knows_no_web_framework() -> None:
    # sqew/sqs speaks AWS words over QueueService; only the server's route imports it.
    assert sources("sqs")
    assert violations(sources("sqs"), (*ENGINE_FORBIDDEN, "sqew.backends")) == []
    assert violations(sources("core", "backends", "cli", "client"), ("sqew.sqs",)) == []


def test_the_server_never_imports_the_cli() -> None:
    assert violations(sources("server"), ("sqew.cli",)) == []


@pytest.mark.parametrize(("module", "command"), [("sqew.server", "serve.py"),
                                                 ("sqew.relay", "relay.py")])
def test_the_cli_imports_a_heavy_part_only_inside_its_command(module: str, command: str) -> None:
    bad = []
    for f in sources("cli"):
        for imp in imports_of(f):
            if is_under(imp.module, module) and (f.name != command or imp.top_level):
                bad.append(f"{f.relative_to(PACKAGE.parent)}:{imp.line} imports {imp.module}")
    assert bad == []


def test_the_import_scanner_sees_nested_and_relative_imports() -> None:
    # The rules above are only as good as the scanner: check it on known files.
    assert any(i.module == "sqew.backends.base" for f in sources("core") for i in imports_of(f))
    sqlite_py = PACKAGE / "backends" / "sqlite" / "backend.py"
    nested = [i for i in imports_of(sqlite_py) if i.module == "sqew.migrate"]
    assert nested and not any(i.top_level for i in nested)
    for_types = [i for i in imports_of(PACKAGE / "cli" / "relay.py") if i.module == "sqew.relay"]
    assert for_types and not any(i.top_level for i in for_types)  # under `if TYPE_CHECKING:`
