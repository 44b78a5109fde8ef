"""The wheel ships the Alembic scripts, and ``sqew db upgrade`` works from a real install.

The scripts live at the top-level ``alembic/`` (docs/architecture.md, "Migrations") and are mapped
into the package as ``sqew/_alembic`` by hatch's ``force-include``. The editable install the suite
runs on reads them from the source tree, so only a built wheel, installed the way ``pip install``
does, shows that a user's ``sqew db upgrade`` finds them.
"""

from __future__ import annotations

import importlib.util
import os
import sqlite3
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from sqew import migrate

ROOT = Path(__file__).resolve().parents[2]
PIP_S = 300


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sqew's wheel, built from the working tree."""
    out = tmp_path_factory.mktemp("wheel")
    # hatchling is in the test extra: no isolated build env to download (fast, offline).
    # A venv set up before it was added still builds, through an isolated env.
    isolation = (["--no-build-isolation"] if importlib.util.find_spec("hatchling") else [])
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", *isolation,
         "-w", str(out), str(ROOT)],
        check=True, timeout=PIP_S, capture_output=True,
    )
    (built,) = out.glob("sqew-*.whl")
    return built


def test_the_wheel_holds_env_py_and_every_revision(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    revisions = sorted(p.name for p in (ROOT / "alembic" / "versions").glob("*.py"))
    assert revisions, "no revision in alembic/versions"
    shipped = sorted(n.rsplit("/", 1)[1] for n in names
                     if n.startswith("sqew/_alembic/versions/") and n.endswith(".py"))
    assert shipped == revisions
    assert {"sqew/_alembic/env.py", "sqew/_alembic/script.py.mako"} <= names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_the_wheel_ships_the_sqs_query_model(wheel: Path) -> None:
    """The SQS endpoint reads the Query protocol's names from it at run time."""
    with zipfile.ZipFile(wheel) as zf:
        assert "sqew/sqs/querymodel/sqs/2012-11-05/service-2.json" in set(zf.namelist())


def test_the_wheel_ships_the_dashboards_templates(wheel: Path) -> None:
    """The /ui pages are rendered from them at run time."""
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    for page in ("base", "queues", "queue", "keys", "login", "error", "_messages"):
        assert f"sqew/server/ui/templates/{page}.html" in names


def test_the_wheel_ships_pysparks_discovery_module(wheel: Path) -> None:
    """``pyspark_sqew`` is what PySpark imports to find the ``sqew`` format by itself."""
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        assert "pyspark_sqew/__init__.py" in names
        assert "DefaultSource" in zf.read("pyspark_sqew/__init__.py").decode()


def test_the_wheel_ships_no_development_tool(wheel: Path) -> None:
    """The benchmarks (``bench/``) and the fault-injection harness (``chaos/``) stay in the
    repository."""
    with zipfile.ZipFile(wheel) as zf:
        tops = {n.split("/", 1)[0] for n in zf.namelist()}
    assert not tops & {"bench", "chaos", "tests", "scripts"}, sorted(tops)


def test_db_upgrade_works_from_a_non_editable_install(wheel: Path, tmp_path: Path) -> None:
    # A venv of its own with only the wheel installed in it; the dependencies (already in
    # the test venv) are reached through a .pth file rather than downloaded again. Paths a
    # .pth adds are not scanned for .pth files, so the test venv's editable sqew stays out.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=PIP_S)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True, timeout=60, capture_output=True, text=True,
    ).stdout.strip()
    Path(purelib, "_test_deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
         "--no-deps", "--no-index", str(wheel)],
        check=True, timeout=PIP_S, capture_output=True,
    )
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SQEW_", "PYTHON", "VIRTUAL_ENV"))}
    where = subprocess.run(
        [str(python), "-c", "import sqew, sqew.migrate as m; print(sqew.__file__); "
                            "print(m.scripts_dir())"],
        check=True, timeout=60, capture_output=True, text=True, cwd=tmp_path, env=env,
    ).stdout.split()
    assert where == [f"{purelib}/sqew/__init__.py", f"{purelib}/sqew/_alembic"]

    db = tmp_path / "x.db"
    result = subprocess.run([str(venv / "bin" / "sqew"), "--db", str(db), "db", "upgrade"],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env,
                            check=False)
    assert result.returncode == 0, result
    assert result.stderr == ""
    head = migrate.head()  # of the source tree's scripts, which the wheel copied
    assert result.stdout.strip() == f"database {db} is at revision {head}"
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [
            (head,)]
    finally:
        conn.close()
