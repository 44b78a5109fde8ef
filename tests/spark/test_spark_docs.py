"""docs/spark.md's examples run as written: its ``python`` blocks, in order, as one script in
a fresh directory (Spark resolves relative paths against its own working directory, so the
script runs in a process of its own, as a user would run it).

Blocks fenced as ``py`` (a server URL, a cluster) are shown, not run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TEST_JVM_OPTIONS

pytestmark = pytest.mark.spark

DOC = Path(__file__).resolve().parents[2] / "docs" / "spark.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M)


def test_the_examples_run(tmp_path: Path) -> None:
    blocks = python_blocks(DOC.read_text())
    assert len(blocks) >= 4  # register, write, snapshot, stream
    script = tmp_path / "examples.py"
    script.write_text("\n".join(blocks) + "\nspark.stop()\nprint('examples ran')\n")
    # As a user runs them, but with the tests' JVM options (``spark-submit``'s own flag).
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               PYSPARK_SUBMIT_ARGS=f'--driver-java-options "{TEST_JVM_OPTIONS}" pyspark-shell')
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.strip().endswith("examples ran")
    assert (tmp_path / "sqew.db").exists() and (tmp_path / "events-out").is_dir()
