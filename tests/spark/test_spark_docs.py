"""docs/spark.md's examples run as written: its ``python`` blocks, in order, as one script.

The script runs in this process, on the Spark tests' shared context (``conftest.py``): its
``SparkSession.builder…getOrCreate()`` gets that context's session, as a script in a
notebook or a shell that already has Spark running does. Its relative paths are resolved by
Spark (the JVM, and the Python workers it starts) against the JVM's working directory, and
by sqew's Client against this process's: the script runs with both the same, a directory
of this run that nothing else writes to (``SparkContexts.cwd``), as a user runs it where
they stand.

Blocks fenced as ``py`` (a server URL, a cluster) are shown, not run.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import SparkContexts

pytestmark = pytest.mark.spark

DOC = Path(__file__).resolve().parents[2] / "docs" / "spark.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M)


def test_the_examples_run(spark_contexts: SparkContexts,
                          monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = python_blocks(DOC.read_text())
    assert len(blocks) >= 4  # register, write, snapshot, stream
    spark_contexts.session()  # the context the script's getOrCreate finds
    here = spark_contexts.cwd
    monkeypatch.chdir(here)
    exec(compile("\n".join(blocks), str(DOC), "exec"), {"__name__": "__main__"})
    assert (here / "sqew.db").exists() and (here / "events-out").is_dir()
