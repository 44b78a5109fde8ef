"""What the fork server of the workload processes imports once, before it forks them
(``procs.start_workload``): the workload, and every sqew module a process may load (the
test suite's fork server's list, ``tests/forkserver.py``), so that a forked process opens its
Client without importing anything."""

from __future__ import annotations

from chaos import procs, workload  # noqa: F401  (imported for the processes forked after)
from chaos.suite import from_tests

from_tests("forkserver").preload()
