"""The ``read-only`` scenario's probes (``chaos.faults_readonly``): an enqueue and reads
through each interface as the workload's user, their answers counted and judged: while the
database is read-only, writes refused with the clear error and reads answered; after, writes
done; and every enqueue acknowledged still there at the end."""

from __future__ import annotations

import json
import subprocess
import tempfile
import threading
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chaos import procs
from chaos.procs import SQEW_BIN, STOP_S, User
from chaos.run import Run

PROBE_QUEUE = "probe"
"""The queue the probes enqueue to (not one of the workload's: the oracle does not read it)."""
PROBE_TIMEOUT_S = 60.0
CLEAR = ("Unavailable", "read-only")
"""A refused write's code, and a word its message must hold."""


def client_probe(db: str, tag: str, out: str, user: User | None) -> None:
    """The embedded Client's probe, in a process forked for it (``procs.fork``): as the
    workload's user, an enqueue (its id, or the error) and reads (``ok``, or the error),
    written to ``out`` as JSON (opened first: the harness reads it)."""
    import sqew
    from sqew import errors

    with open(out, "w") as f:
        if user is not None:
            user.become()
        answers: dict[str, object] = {}

        def call(name: str, fn: Callable[[], object]) -> None:
            try:
                answers[name] = fn()
            except errors.SqewError as exc:
                answers[name] = f"{exc.code}: {exc.message}"
            except Exception as exc:  # a wrong answer: sqew raised something else
                answers[name] = f"{type(exc).__name__}: {exc}"

        def read(client: sqew.Client) -> str:
            client.list_queues()
            client.stats(PROBE_QUEUE)
            return "ok"

        try:
            with sqew.Client(db, create=False) as client:  # type: ignore[abstract]
                call("enqueue", lambda: client.enqueue(PROBE_QUEUE, {"probe": tag}).message_id)
                call("read", lambda: read(client))
        except Exception as exc:
            answers["open"] = f"{type(exc).__name__}: {exc}"
        f.write(json.dumps(answers))


class Probes:
    """The probes' answers: counted by kind, the wrong ones kept, acknowledged ids noted."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.user = run.user
        self.counts: Counter[str] = Counter()
        self.wrong: list[str] = []
        self.ids: list[int] = []
        self.sent = 0
        self._lock = threading.Lock()

    def note(self, phase: str, kind: str, answer: str, good: bool) -> None:
        with self._lock:
            self.counts[f"{phase}: {kind} {answer if good else 'WRONG'}"] += 1
            if not good:
                self.wrong.append(f"{phase}: {kind}: {answer}")

    def _env(self) -> dict[str, str]:
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
        return {**env, **(self.user.env if self.user else {})}

    def _run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(  # type: ignore[call-overload, no-any-return]
            argv, capture_output=True, text=True, check=False, timeout=PROBE_TIMEOUT_S,
            env=self._env(), cwd="/", **(self.user.popen() if self.user else {}))

    def _sqew(self) -> list[str]:
        return list(self.user.sqew) if self.user else [str(SQEW_BIN)]

    def client(self, phase: str, read_only: bool) -> None:
        """The embedded Client in a fresh process of the user: an enqueue, then reads."""
        with tempfile.NamedTemporaryFile(dir=self.run.directory, suffix=".probe") as out:
            proc = procs.fork(client_probe, self.run.target, phase, out.name, self.user)
            proc.join(PROBE_TIMEOUT_S)
            if proc.is_alive():
                procs.kill_tree(proc)
            try:
                answers = json.loads(Path(out.name).read_text())
            except ValueError:
                answers = {"open": f"no answer (exit {proc.exitcode})"}
        if "open" in answers:
            self.note(phase, "client", str(answers["open"]), False)
            return
        self._enqueued(phase, "client enqueue", answers.get("enqueue"), read_only)
        self.note(phase, "client read", str(answers.get("read")), answers.get("read") == "ok")

    def _cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self._run([*self._sqew(), "--db", self.run.target, "--json", *args])

    def cli(self, phase: str, read_only: bool) -> None:
        """An enqueue through the ``sqew`` command, as the user."""
        done = self._cli("message", "enqueue", "--queue", PROBE_QUEUE,
                         "--payload", json.dumps({"probe": phase}))
        if done.returncode == 0:
            try:
                answer: object = int(json.loads(done.stdout)["message_id"])
            except (ValueError, KeyError, TypeError):
                answer = f"exit 0: {done.stdout.strip()[-300:]}"
        elif done.returncode == 1 and done.stderr.count("\n") == 1 and \
                (error := _envelope(done.stderr)) is not None:
            answer = error
        else:
            answer = f"exit {done.returncode}: {done.stderr.strip()[-300:]}"
        self._enqueued(phase, "cli enqueue", answer, read_only)

    def cli_read(self, phase: str, read_only: bool) -> None:
        """``sqew queue list`` or ``sqew stats`` (in turn), as the user."""
        args = (["queue", "list"], ["stats", "--queue", PROBE_QUEUE])[self.run.faults % 2]
        done = self._cli(*args)
        self.note(phase, f"cli {' '.join(args[:2])}", "ok" if done.returncode == 0 else
                  f"exit {done.returncode}: {done.stderr.strip()[-300:]}", done.returncode == 0)

    def http(self, phase: str, read_only: bool) -> None:
        """HTTP to the server (started while the database was read-only): an enqueue, the
        stats."""
        status, body = http_call(f"{self.run.server.url}/queues/{PROBE_QUEUE}/messages",
                             {"payload": {"probe": phase}})
        answer: object = f"{status} {body}"
        if status == 201 and isinstance(body, dict) and "message_id" in body:
            answer = int(body["message_id"])
        elif status == 503 and isinstance(body, dict) and isinstance(body.get("error"), dict):
            answer = f"{body['error'].get('code')}: {body['error'].get('message')}"
        self._enqueued(phase, "http enqueue", answer, read_only)
        status, body = http_call(f"{self.run.server.url}/queues/{PROBE_QUEUE}/stats")
        self.note(phase, "http stats", str(status), status == 200)

    def _enqueued(self, phase: str, kind: str, answer: object, read_only: bool) -> None:
        """A write's answer: refused with the clear error while read-only, done after."""
        self.sent += 1
        if isinstance(answer, int) and not isinstance(answer, bool):
            with self._lock:
                self.ids.append(answer)
            self.note(phase, kind, "done", not read_only)
            return
        text = str(answer)
        clear = text.startswith(f"{CLEAR[0]}:") and CLEAR[1] in text and "\n" not in text
        self.note(phase, kind, "refused (Unavailable: read-only)" if clear else text,
                  read_only and clear)

    def all(self, phase: str, read_only: bool, server: Callable[[], None] | None = None) -> None:
        """Every interface at once, each in a thread of its own, the HTTP one after
        ``server`` (its start); back once all answered."""
        def http(phase: str, read_only: bool) -> None:
            if server is not None:
                server()
            self.http(phase, read_only)

        probes = [self.client, self.cli, http] + ([self.cli_read] if read_only else [])
        threads = [threading.Thread(target=self._guarded, args=(fn, phase, read_only),
                                    daemon=True) for fn in probes]
        for t in threads:
            t.start()
        for t in threads:
            t.join(3 * PROBE_TIMEOUT_S + STOP_S)

    def _guarded(self, fn: Callable[[str, bool], None], phase: str, read_only: bool) -> None:
        try:
            fn(phase, read_only)
        except Exception as exc:  # the probe itself failed (a timeout): an unclear answer
            self.note(phase, fn.__name__, f"no answer: {exc!r}", False)

    def kept(self) -> None:
        """Every enqueue a probe saw acknowledged is in the probe queue (nobody consumes it),
        read page by page through the server."""
        there: set[int] = set()
        after: int | None = 0
        while after is not None:
            url = f"{self.run.server.url}/queues/{PROBE_QUEUE}/messages?after_id={after}"
            try:
                status, body = http_call(f"{url}&limit=1000")
            except OSError as exc:  # no server to answer
                status, body = 0, repr(exc)
            if status != 200 or not isinstance(body, dict):
                self.wrong.append(f"the probe queue could not be read: {status} {body}")
                return
            there |= {m["id"] for m in body["messages"]}
            after = body.get("next_after_id")
        lost = sorted(set(self.ids) - there)
        if lost:
            self.wrong.append(f"probe enqueues acknowledged but lost: {lost}")


def _envelope(text: str) -> str | None:
    """``code: message`` of the error envelope ``text`` is (with ``--json``, the command line
    prints the REST API's), or None if it is none."""
    try:
        error = json.loads(text)["error"]
        return f"{error['code']}: {error['message']}"
    except (ValueError, KeyError, TypeError):
        return None


def http_call(url: str, body: object = None) -> tuple[int, Any]:
    """An HTTP call (a POST of ``body`` as JSON if given): its status and its JSON body (or
    its text)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="GET" if body is None else "POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S) as answer:
            status, text = answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read().decode()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text
