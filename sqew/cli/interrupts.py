"""Ctrl-C in the ``sqew`` command: at any moment, exit 130 and print nothing (docs/cli.md,
"Signals").

A run has three phases, and SIGINT does what suits each:

- **Starting** (Python imports sqew's modules and its libraries: a few hundred milliseconds)
  and **ending** (the command is done, its output flushed; the interpreter shuts down): the
  process ends at once with status 130. Nothing has been done yet, or everything is done and
  written. ``KeyboardInterrupt`` raised in the middle of an import would print a traceback,
  and inside an extension module's initialisation it can crash the interpreter.
- **Running a command**: SIGINT raises ``KeyboardInterrupt`` (Python's own handler, which
  asyncio also expects), so the command can stop cleanly: a transaction rolls back, ``message
  enqueue --file`` says what was committed. ``sqew.cli.app.main`` turns it into status 130.

A signal that was ignored when sqew started stays ignored: a non-interactive shell starts a
background job (``sqew … &``) with SIGINT ignored, so that a Ctrl-C typed at the terminal stops
only the foreground command; Python keeps that, and so does sqew.

``sqew.cli.main`` calls ``take_over`` before any other import, so this module imports only
what the interpreter has loaded before running anything: even the ``signal`` module (its
enums) takes longer to import than a Ctrl-C may wait.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # what type checkers read (typing.TYPE_CHECKING, without importing typing)
if TYPE_CHECKING:
    import signal as _signal
    from collections.abc import Callable
    from types import FrameType, TracebackType

    ExceptHook = Callable[[type[BaseException], BaseException, TracebackType | None], object]
else:
    try:  # the C module behind `signal`, loaded with the interpreter (CPython)
        import _signal
    except ImportError:
        import signal as _signal
del TYPE_CHECKING

EXIT_INTERRUPTED = 128 + _signal.SIGINT  # 130: what shells report for Ctrl-C
EXIT_TERMINATED = 128 + _signal.SIGTERM  # 143: what shells report for a SIGTERM


def exit_status(signum: int) -> int:
    """The exit status of a run a signal stopped: 128 + its number, as shells report it."""
    return 128 + signum


def take_over() -> bool:
    """From now on, Ctrl-C ends the process at once with status 130 (but within ``raising``).

    Returns:
        Whether SIGINT is sqew's to handle: False when it was ignored (or handled by someone
        else) when the process started, which stays so.
    """
    current = _signal.getsignal(_signal.SIGINT)
    if current is _exit_at_once:
        return True
    if current is not _signal.default_int_handler:
        return False
    _signal.signal(_signal.SIGINT, _exit_at_once)
    sys.excepthook = _quiet_interrupt(sys.excepthook)
    return True


class Terminated(BaseException):
    """A SIGTERM stopped the command (``timeout``, systemd and Kubernetes stop jobs so): it
    unwinds as a Ctrl-C does, cleaning up on the way (``finally``, context managers), and the
    run exits with 143. Not a ``KeyboardInterrupt``: Typer would answer that with 130."""


class raising:
    """While the block runs, Ctrl-C raises ``KeyboardInterrupt`` and SIGTERM ``Terminated``;
    before and after, Ctrl-C ends the process at once (``take_over``). Nothing changes for a
    signal that is not ``ours`` (SIGINT) or not at its default (SIGTERM)."""

    def __init__(self, ours: bool) -> None:
        self._ours = ours
        self._term = False

    def __enter__(self) -> None:
        if self._ours:
            _signal.signal(_signal.SIGINT, _signal.default_int_handler)
        if _signal.getsignal(_signal.SIGTERM) == _signal.SIG_DFL:
            _signal.signal(_signal.SIGTERM, _raise_terminated)
            self._term = True

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        if self._ours:
            _signal.signal(_signal.SIGINT, _exit_at_once)
        if self._term:
            _signal.signal(_signal.SIGTERM, _signal.SIG_DFL)
        if _handed_to_asyncio and kind is not None and issubclass(kind, KeyboardInterrupt):
            raise Terminated  # the SIGTERM that asyncio's Ctrl-C handling unwound


def terminated_in_event_loop() -> bool:
    """Whether a ``KeyboardInterrupt`` is the unwinding of a SIGTERM that came while an
    event loop ran (see ``_raise_terminated``): the run then exits 143, not 130."""
    return _handed_to_asyncio


_handed_to_asyncio = False
"""A SIGTERM came while an event loop ran and went through asyncio's own Ctrl-C handling."""


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    """Raise ``Terminated``; inside a running event loop (a long poll), hand the signal to
    the handler ``asyncio.run`` installed for Ctrl-C instead: it cancels the running task, so
    every task ends cleanly, where an exception raised in the middle of the loop's own code
    would leave tasks pending (``terminated_in_event_loop`` tells its ``KeyboardInterrupt``
    from a Ctrl-C)."""
    global _handed_to_asyncio
    asyncio = sys.modules.get("asyncio")
    current = _signal.getsignal(_signal.SIGINT)
    if asyncio is not None and asyncio.events._get_running_loop() is not None \
            and callable(current) and current not in (_signal.default_int_handler,
                                                     _exit_at_once):
        _handed_to_asyncio = True
        current(signum, frame)
        return
    raise Terminated


def _exit_at_once(signum: int, frame: FrameType | None) -> None:
    os._exit(exit_status(signum))


def _quiet_interrupt(previous: ExceptHook) -> ExceptHook:
    """``sys.excepthook`` that ends the process with 130 for a ``KeyboardInterrupt`` nobody
    caught (a Ctrl-C that fell between two of the handlers above) instead of printing it."""

    def hook(kind: type[BaseException], value: BaseException,
             tb: TracebackType | None) -> None:
        if issubclass(kind, KeyboardInterrupt):
            os._exit(EXIT_INTERRUPTED)
        if issubclass(kind, Terminated):
            os._exit(EXIT_TERMINATED)
        previous(kind, value, tb)

    return hook
