"""Take docs/img/ui.png: the /ui overview of a demo server, in Debian's headless chromium.

Run with the worktree's Python (``.venv/bin/python scripts/ui_screenshot.py``): it serves a
scratch database on a free port with ``sqew serve``, puts some traffic through three queues
for about half a minute (the rate charts sample every 5 s while the page is open), and saves
the overview. Nothing is downloaded: the browser is the system's chromium.
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

import sqew

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "img" / "ui.png"
ROUNDS = 7


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def traffic(client: sqew.Client, rng: random.Random) -> None:
    """A round of enqueues and acks (some nacked into the DLQ) on the demo queues."""
    for queue, produce, consume in (("orders", 40, 30), ("emails", 25, 25), ("reports", 6, 2)):
        client.enqueue_batch(queue, [{"payload": {"n": rng.randrange(10**6)}}
                                     for _ in range(produce + rng.randrange(10))])
        for m in client.poll(queue, batch=min(consume + rng.randrange(5), 100)):
            if rng.random() < 0.05:
                client.nack(queue, m.id, m.token, error="timeout talking to <upstream>",
                            dead_letter=True)
            else:
                client.ack(queue, m.id, m.token)


def main() -> int:
    chromium = shutil.which("chromium")
    if chromium is None:
        print("error: chromium is missing (apt-get install -y chromium)", file=sys.stderr)
        return 1
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as tmp:
        server = subprocess.Popen([sys.executable, "-m", "sqew", "serve", "--db",
                                   f"{tmp}/demo.db", "--port", str(port)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            client = sqew.Client(url)
            for _ in range(100):
                try:
                    client.health()
                    break
                except Exception:
                    time.sleep(0.1)
            for name in ("orders", "emails", "reports"):
                client.create_queue(name)
            client.pause_queue("reports")
            rng = random.Random(7)
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=chromium, headless=True,
                                            args=["--no-sandbox"])
                page = browser.new_page(viewport={"width": 1100, "height": 420})
                for _ in range(ROUNDS):
                    traffic(client, rng)
                    page.goto(f"{url}/ui/")
                    time.sleep(5.1)  # the charts keep a sample every 5 s
                page.goto(f"{url}/ui/")
                OUT.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(OUT), full_page=True)
                browser.close()
            client.close()
        finally:
            server.terminate()
            server.wait(10)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
