"""The /ui dashboard in a real headless browser (Debian's chromium driven by Playwright for
Python; ``./scripts/test`` installs chromium when it is missing). One browser for the module:
log in, watch a queue's numbers change, peek an HTML payload (shown as text), requeue a DLQ
message, purge with the confirmation, and be refused an action with a consume-only key."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from auth_support import bearer, create_queue, mint
from targets import ServerThread, server_settings

Q = "jobs"
HTML = "<b id='injected'>bold</b>"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
REQUIRED = os.environ.get("SQEW_REQUIRE_BROWSER") == "1"  # set by ./scripts/test
if CHROMIUM is None and not REQUIRED:
    pytest.skip("no chromium (./scripts/test installs it)", allow_module_level=True)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str]]:
    """The module's server: (url, admin key, consume-only key)."""
    db: Path = tmp_path_factory.mktemp("ui-browser") / "ui.db"
    create_queue(db, Q)
    admin, consume = mint(db, "admin").key, mint(db, "consume").key
    server = ServerThread(server_settings(db))
    yield server.url, admin, consume
    server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless chromium for the module (the system's, never a downloaded one)."""
    assert CHROMIUM is not None, "chromium is missing: ./scripts/test installs it"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--no-sandbox"])
        yield launched
        launched.close()


def login(page: Any, url: str, key: str) -> None:
    page.goto(f"{url}/ui/login")
    page.fill("input[name=key]", key)
    page.click("#login")
    page.wait_for_url(f"{url}/ui/")


def cell(page: Any, col: str) -> int:
    return int(page.locator(f'tr[data-queue="{Q}"] td[data-col="{col}"]').inner_text())


def test_the_dashboard_in_a_browser(served: tuple[str, str, str], browser: Any) -> None:
    url, admin, consume = served
    api = httpx.Client(base_url=url, headers=bearer(admin), timeout=30)
    context = browser.new_context()
    page = context.new_page()
    login(page, url, admin)
    assert cell(page, "ready") == 0

    api.post(f"/queues/{Q}/messages", json={"payload": {"html": HTML}}).raise_for_status()
    page.goto(f"{url}/ui/")
    assert cell(page, "ready") == 1

    page.click(f'tr[data-queue="{Q}"] a')
    payload = page.locator("#messages pre.payload").first.inner_text()
    assert HTML in payload  # the markup shown as text ...
    assert page.locator("#injected").count() == 0  # ... never made an element

    dead = api.post(f"/queues/{Q}/messages", json={"payload": "dead"}).json()["message_id"]
    leased = api.post(f"/queues/{Q}/poll", params={"batch": 10}).json()["messages"]
    for m in leased:
        nack = {"id": m["id"], "token": m["token"], "dead_letter": m["id"] == dead}
        api.post(f"/queues/{Q}/nack", json=nack).raise_for_status()
    page.reload()
    page.check(f'#dlq tr[data-id="{dead}"] input[type=checkbox]')
    page.click("#requeue-selected")
    assert "requeued 1" in page.locator("#note").inner_text()
    assert page.locator(f'#messages tr[data-id="{dead}"] td').nth(1).inner_text() == "ready"
    assert page.locator(f'#dlq tr[data-id="{dead}"]').count() == 0

    page.fill("#purge-confirm", Q)
    page.click("#purge")
    assert "purged 2 messages" in page.locator("#note").inner_text()
    assert page.locator('#stats td[data-col="ready"]').inner_text() == "0"

    # An admin's page left open while the browser logs in with a consume-only key: its form
    # is posted with the cookie's key now, and refused.
    other = context.new_page()
    login(other, url, consume)
    page.click("#pause")
    assert "lacks the admin scope" in page.locator("#error").inner_text()
    assert api.get(f"/queues/{Q}").json()["paused"] is False
    context.close()
    api.close()
