"""A real local Spark session per test module (``local[2,2]``), with sqew's data source.

The modules' sessions are new sessions (``SparkSession.newSession``) of one SparkContext per
process (``SparkContexts``): each has its own SQL settings and registered data sources, and
they share the context's JVM-side state and Python workers. A context starts PySpark's Python
daemons (a data source's lookup, planning, writing and committing each have their own) the
first time a module uses them, seconds of CPU that every new context would spend again. A
module that needs other core settings (a master, ``spark.buffer.size``) gets a context of
its own: the shared one is stopped and another started.

Skipped when pyspark is not installed (it comes with the ``spark`` extra:
``SQEW_EXTRAS=test,spark``), unless ``SQEW_REQUIRE_SPARK`` is set, as ``./scripts/test`` sets it
when it installs that extra: then a missing pyspark is an error.
Every module here sets ``pytestmark = pytest.mark.spark`` (select
with ``-m spark``, leave out with ``-m "not spark"``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("SQEW_REQUIRE_SPARK"):  # ./scripts/test: a broken install fails, never skips
    import pyarrow  # noqa: F401
    import pyspark  # noqa: F401
else:
    pytest.importorskip("pyspark", reason="the spark extra is not installed")
    pytest.importorskip("pyarrow", reason="the spark extra is not installed")


TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""The JVM of a test's Spark runs short jobs on a busy 2-core box: compiled by C1 alone (C2's
optimising compiler costs more CPU than these jobs live long enough to win back) and collected
by one thread. Together about a quarter less CPU for the Spark tests, the same results."""


MASTER = "local[2,2]"
"""Two cores, and a failed task is retried once (local mode's maxFailures): what
test_spark_write's retried task needs, and a test whose task fails only fails a little later."""
CORE = {"spark.buffer.size": "4096"}
"""Small buffers between the JVM and its Python workers, so a task's rows reach sqew's writer
while its later rows are computed (test_spark_write's retried task has enqueued some when it
fails). One context for every module: another master or core setting would be a second
context, a new JVM and new Python daemons, a tenth of the Spark tests' CPU."""


def make_session(tmp: Path, master: str = MASTER, *, register: bool = True,
                 **conf: str) -> Any:
    """A SparkSession for one module; its Python workers run this interpreter (sqew in it).

    ``register=False`` leaves the ``sqew`` format to PySpark's own discovery (``pyspark_sqew``).
    """
    from pyspark.sql import SparkSession

    import sqew.spark

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    here = os.getcwd()
    builder = (
        SparkSession.builder.master(master)
        .appName("sqew-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", str(tmp / "warehouse"))
        .config("spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={tmp} {TEST_JVM_OPTIONS}")
        .config("spark.local.dir", str(tmp / "local"))
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    # The JVM (started by the process's first session) and the Python workers it starts
    # resolve relative paths against the directory it starts in: ``jvm_cwd(tmp)``.
    os.chdir(jvm_cwd(tmp))
    try:
        spark = builder.getOrCreate()
    finally:
        os.chdir(here)
    spark.sparkContext.setLogLevel("ERROR")
    if register:
        sqew.spark.register(spark)
    return spark


def jvm_cwd(tmp: Path) -> Path:
    """The working directory of the JVM of the sessions made in ``tmp``: where a relative
    path a session reads or writes lands (test_spark_docs.py runs docs/spark.md there)."""
    path = tmp / "cwd"
    path.mkdir(exist_ok=True)
    return path


class SparkContexts:
    """This process's SparkContext, shared by the Spark test modules (see the module
    docstring); ``stop()`` stops it."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self._root: Any = None
        self._built_for: tuple[str, tuple[tuple[str, str], ...]] | None = None

    def session(self, master: str = MASTER, *, register: bool = True,
                core: Mapping[str, str] | None = None, **sql: str) -> Any:
        """A new session with the SQL settings ``sql``, on a context of ``master`` and the
        ``core`` settings on top of ``CORE`` (the running one when it has them);
        ``register=False`` leaves the ``sqew`` format to PySpark's own discovery."""
        import sqew.spark

        settings = {**CORE, **(core or {})}
        wanted = (master, tuple(sorted(settings.items())))
        if self._root is None or self._built_for != wanted:
            self.stop()
            self._root = make_session(self.tmp, master, register=False, **settings)
            self._built_for = wanted
        session = self._root.newSession()
        for key, value in sql.items():
            session.conf.set(key, value)
        if register:
            sqew.spark.register(session)
        return session

    @property
    def cwd(self) -> Path:
        """The working directory of the JVM and its Python workers (``jvm_cwd``)."""
        return jvm_cwd(self.tmp)

    def stop(self) -> None:
        """Stop the context, if one runs."""
        if self._root is not None:
            self._root.stop()
            self._root = None


@pytest.fixture(scope="session")
def spark_contexts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkContexts]:
    """The process's shared SparkContext, stopped at the end of the run."""
    contexts = SparkContexts(tmp_path_factory.mktemp("spark"))
    yield contexts
    contexts.stop()


@pytest.fixture(scope="module")
def spark(spark_contexts: SparkContexts) -> Any:
    """The module's session (``MASTER``); a module needing other settings overrides it."""
    return spark_contexts.session()
