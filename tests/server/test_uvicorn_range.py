"""The uvicorn releases ``sqew serve`` runs on: the range its HTTP protocol is written for.

``sqew.server.protocols.HttpProtocol`` builds on uvicorn internals, so pyproject.toml pins the
range it is tested with, the installed uvicorn must be in it (this suite fails loudly on any
other), and ``sqew serve`` refuses another release with one line before it binds anything.
"""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
import uvicorn
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from sqew import errors
from sqew.server import uvicorn_range

from .support import SQEW_BIN

ROOT = Path(__file__).resolve().parents[2]


def _pinned() -> SpecifierSet:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (uvicorn_req,) = [Requirement(r) for r in project["dependencies"]
                      if Requirement(r).name == "uvicorn"]
    return uvicorn_req.specifier


def test_pyproject_pins_the_range_the_protocol_is_written_for() -> None:
    pinned = _pinned()
    assert pinned == SpecifierSet(uvicorn_range.VERSIONS)
    assert any(s.operator == "<" for s in pinned), "an upper bound: internals change"


def test_the_installed_uvicorn_is_supported() -> None:
    """Fails on a uvicorn outside the range: the protocol was not written for it."""
    assert uvicorn.__version__ in SpecifierSet(uvicorn_range.VERSIONS), (
        f"uvicorn {uvicorn.__version__} is installed, outside {uvicorn_range.VERSIONS}: "
        "check sqew/server/protocols.py against it before widening the range")
    uvicorn_range.check()
    # What the protocol calls or overrides is there (a rename would fail only at run time).
    for name in uvicorn_range.USED:
        assert callable(getattr(HttpToolsProtocol, name, None)), name


@pytest.mark.parametrize("version", ["0.44.0", "0.55.0", "1.2.3", "0.45.0rc1", "unknown"])
def test_another_release_is_refused_in_one_line(version: str) -> None:
    with pytest.raises(errors.Unavailable) as caught:
        uvicorn_range.check(version)
    message = caught.value.message
    assert "\n" not in message
    assert f"uvicorn {version} is installed" in message
    assert uvicorn_range.VERSIONS in message


@pytest.mark.parametrize("version", ["0.45.0", "0.54.0", "0.54.7"])
def test_releases_in_the_range_are_accepted(version: str) -> None:
    uvicorn_range.check(version)


def test_serve_refuses_to_start_on_an_unsupported_uvicorn(tmp_path: Path) -> None:
    """A real ``sqew serve`` whose uvicorn reports a release outside the range (set by a
    ``sitecustomize`` before sqew runs: the only way to have one installed here)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import uvicorn\nuvicorn.__version__ = '0.44.0'\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
        str(site), os.environ.get("PYTHONPATH")]))}
    db = tmp_path / "x.db"
    result = subprocess.run([str(SQEW_BIN), "serve", "--db", str(db), "--port", "0"],
                            capture_output=True, text=True, timeout=60, check=False, env=env)
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert re.match(r"error: Unavailable: uvicorn 0\.44\.0 is installed", lines[0]), lines
    assert result.stdout == ""  # never announced, never bound
    assert not db.exists()  # refused before the database is opened
