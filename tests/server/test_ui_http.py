"""The /ui dashboard over plain HTTP (docs/ui.md): the cookie's flags, CSRF refusals, the
API's permission checks on the cookie's key, and escaping of what users sent."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from auth_support import bearer, create_queue, mint
from targets import ServerThread, server_settings

Q = "jobs"


@dataclass
class Served:
    url: str
    admin: str
    consume: str
    produce: str


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One server for the module, with a queue and keys of three scopes."""
    db: Path = tmp_path_factory.mktemp("ui") / "ui.db"
    create_queue(db, Q)
    keys = [mint(db, scope).key for scope in ("admin", "consume", "produce")]
    server = ServerThread(server_settings(db))
    yield Served(server.url, *keys)
    server.stop()


def browser(url: str) -> httpx.Client:
    """A client that keeps cookies, as a browser does, and shows redirects as they are."""
    return httpx.Client(base_url=url, timeout=30, follow_redirects=False)


def set_cookie(response: httpx.Response, name: str) -> str:
    """The ``Set-Cookie`` header of ``response`` that sets ``name``."""
    found = [v for v in response.headers.get_list("set-cookie") if v.startswith(f"{name}=")]
    assert len(found) == 1, response.headers.get_list("set-cookie")
    return found[0]


def login(http: httpx.Client, key: str) -> httpx.Response:
    """Open the login page (for the CSRF cookie), then post the key."""
    assert http.get("/ui/login").status_code == 200
    return http.post("/ui/login", data={"csrf": http.cookies["sqew_ui_csrf"], "key": key})


def paused(served: Served) -> bool:
    got = httpx.get(f"{served.url}/queues/{Q}", headers=bearer(served.admin), timeout=30)
    return bool(got.json()["paused"])


def test_the_key_is_kept_in_an_httponly_strict_cookie(served: Served) -> None:
    with browser(served.url) as http:
        page = http.get("/ui/login")
        csrf = set_cookie(page, "sqew_ui_csrf").lower()
        assert {"httponly", "samesite=strict", "path=/ui"} <= {
            p.strip() for p in csrf.split(";")}
        done = login(http, served.admin)
        assert (done.status_code, done.headers["location"]) == (303, "/ui/")
        kept = {p.strip().lower() for p in set_cookie(done, "sqew_ui_key").split(";")}
        assert {"httponly", "samesite=strict", "path=/ui"} <= kept
        assert "secure" not in kept  # plain HTTP here: a Secure cookie would never come back
        overview = http.get("/ui/")
        assert overview.status_code == 200
        assert f'data-queue="{Q}"' in overview.text
        assert 'http-equiv="refresh"' in overview.text


def test_without_a_key_or_with_a_wrong_one_the_browser_is_sent_to_log_in(
        served: Served) -> None:
    with browser(served.url) as http:
        page = http.get("/ui/")
        assert (page.status_code, page.headers["location"]) == (303, "/ui/login")
        wrong = login(http, "sqew_0123456789abcdef_" + "x" * 43)
        assert wrong.status_code == 401
        assert 'id="login-error"' in wrong.text
        assert "sqew_ui_key" not in http.cookies


def test_a_form_without_the_csrf_token_is_refused(served: Served) -> None:
    with browser(served.url) as http:
        login(http, served.admin)
        token = http.cookies["sqew_ui_csrf"]
        for data in ({}, {"csrf": "x" * 43}, {"csrf": token[:-1] + ("A" if token[-1] != "A"
                                                                    else "B")}):
            refused = http.post(f"/ui/queues/{Q}/pause", data=data)
            assert refused.status_code == 403, refused.text
            assert "CSRF" in refused.text
            assert not paused(served)
        no_cookie = httpx.post(f"{served.url}/ui/queues/{Q}/pause", data={"csrf": token},
                               cookies={"sqew_ui_key": served.admin}, timeout=30)
        assert no_cookie.status_code == 403  # the token without its cookie: another site's
        assert not paused(served)
        done = http.post(f"/ui/queues/{Q}/pause", data={"csrf": token})
        assert done.status_code == 303
        assert paused(served)
        assert http.post(f"/ui/queues/{Q}/resume", data={"csrf": token}).status_code == 303
        assert not paused(served)


def test_actions_need_admin_and_messages_need_consume(served: Served) -> None:
    with browser(served.url) as http:
        login(http, served.consume)
        token = http.cookies["sqew_ui_csrf"]
        page = http.get(f"/ui/queues/{Q}")
        assert page.status_code == 200
        assert 'id="pause"' not in page.text  # no action offered
        for action in ("pause", "resume", "purge", "dlq/requeue", "settings"):
            refused = http.post(f"/ui/queues/{Q}/{action}",
                                data={"csrf": token, "confirm": Q, "all": "1"})
            assert refused.status_code == 403, (action, refused.text)
            assert "lacks the admin scope" in refused.text
        assert http.get("/ui/keys").status_code == 403
        assert not paused(served)
    with browser(served.url) as http:
        login(http, served.produce)
        assert http.get("/ui/").status_code == 200  # any scope reads the overview
        refused = http.get(f"/ui/queues/{Q}")
        assert refused.status_code == 403
        assert "lacks the consume scope" in refused.text


def test_what_users_sent_is_escaped(served: Served) -> None:
    sent = httpx.post(f"{served.url}/queues/{Q}/messages", headers=bearer(served.admin),
                      timeout=30, json={
                          "payload": {"html": "<script>alert('x')</script>", "ctl": "a\u202eb"},
                          "attributes": {"<b>k</b>": "<img src=x onerror=alert(1)>\x1b[2J"}})
    assert sent.status_code == 201, sent.text
    with browser(served.url) as http:
        login(http, served.admin)
        page = http.get(f"/ui/queues/{Q}")
        assert page.status_code == 200
        html = page.text
        assert "<script>alert" not in html and "<img src=x" not in html and "<b>k" not in html
        assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in html
        assert "&lt;img src=x onerror=alert(1)&gt;\\x1b[2J" in html  # the ESC made visible
        assert "a\\u202eb" in html and "\u202e" not in html
        assert "\x1b" not in html
        token = http.cookies["sqew_ui_csrf"]
        purged = http.post(f"/ui/queues/{Q}/purge", data={"csrf": token, "confirm": "nope"})
        assert purged.status_code == 400  # not confirmed: nothing purged
        assert re.search(r'data-col="ready">1<', http.get(f"/ui/queues/{Q}").text)
        purged = http.post(f"/ui/queues/{Q}/purge", data={"csrf": token, "confirm": Q})
        assert purged.status_code == 303
        assert "purged 1 message" in http.get(purged.headers["location"]).text


def test_a_server_without_keys_is_open_and_says_so(tmp_path: Path) -> None:
    create_queue(tmp_path / "open.db", Q)
    server = ServerThread(server_settings(tmp_path / "open.db"))
    try:
        with browser(server.url) as http:
            page = http.get("/ui/")
            assert page.status_code == 200
            assert 'id="open-banner"' in page.text
            token = http.cookies["sqew_ui_csrf"]
            assert http.post(f"/ui/queues/{Q}/pause", data={"csrf": token}).status_code == 303
            assert http.post(f"/ui/queues/{Q}/pause", data={}).status_code == 403  # CSRF still
    finally:
        server.stop()


def test_keys_are_minted_once_shown_and_revoked(served: Served) -> None:
    with browser(served.url) as http:
        login(http, served.admin)
        token = http.cookies["sqew_ui_csrf"]
        made = http.post("/ui/keys", data={"csrf": token, "name": "<i>ci</i>",
                                           "scope_produce": "on"})
        assert made.status_code == 200, made.text
        key = re.search(r'id="minted-key">([^<]+)<', made.text)
        assert key is not None
        assert "&lt;i&gt;ci&lt;/i&gt;" in made.text and "<i>ci" not in made.text
        key_id = key.group(1).split("_")[1]
        assert httpx.post(f"{served.url}/queues/{Q}/messages", headers=bearer(key.group(1)),
                          json={"payload": 1}, timeout=30).status_code == 201
        none = http.post("/ui/keys", data={"csrf": token, "name": "no scope"})
        assert none.status_code == 400 and "scopes" in none.text
        listed = http.get("/ui/keys").text
        assert key_id in listed and key.group(1) not in listed  # never shown again
        gone = http.post(f"/ui/keys/{key_id}/revoke", data={"csrf": token})
        assert (gone.status_code, gone.headers["location"]) == (303, "/ui/keys")
        assert httpx.post(f"{served.url}/queues/{Q}/messages", headers=bearer(key.group(1)),
                          json={"payload": 1}, timeout=30).status_code == 401
        http.post(f"/ui/queues/{Q}/purge", data={"csrf": token, "confirm": Q})


def test_settings_are_changed_and_bad_values_refused(served: Served) -> None:
    with browser(served.url) as http:
        login(http, served.admin)
        token = http.cookies["sqew_ui_csrf"]
        form = {"csrf": token, "visibility_ms": "45000", "max_attempts": "7", "order": "fifo"}
        assert http.post(f"/ui/queues/{Q}/settings", data=form).status_code == 303
        shown = httpx.get(f"{served.url}/queues/{Q}", headers=bearer(served.admin),
                          timeout=30).json()
        assert (shown["visibility_ms"], shown["max_attempts"]) == (45000, 7)
        bad = http.post(f"/ui/queues/{Q}/settings", data={**form, "max_attempts": "0"})
        assert bad.status_code == 400
        assert "max_attempts" in bad.text
        missing = http.get("/ui/queues/nope")
        assert missing.status_code == 404 and "QueueNotFound" in missing.text


def test_a_queues_messages_come_in_pages(served: Served) -> None:
    api = httpx.Client(base_url=served.url, headers=bearer(served.admin), timeout=30)
    api.post(f"/queues/{Q}/messages", json={"messages": [{"payload": i} for i in range(25)]})
    with browser(served.url) as http:
        login(http, served.admin)
        first = http.get(f"/ui/queues/{Q}").text
        assert first.count('<tr data-id="') == 20
        after = re.search(r'id="messages-next" href="\?after=(\d+)', first)
        assert after is not None
        second = http.get(f"/ui/queues/{Q}", params={"after": after.group(1)}).text
        assert second.count('<tr data-id="') == 5
        assert 'id="messages-next"' not in second
        http.post(f"/ui/queues/{Q}/purge",
                  data={"csrf": http.cookies["sqew_ui_csrf"], "confirm": Q})
    api.close()
