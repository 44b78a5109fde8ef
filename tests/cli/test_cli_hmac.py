"""``--hmac-secret`` / ``SQEW_HMAC_SECRET``: the CLI signs its enqueues to a server, and never
prints the secret."""

from __future__ import annotations

import hashlib
import hmac

from cli_support import Result, Sqew

SECRET = "cli-hmac-secret-0123456789"


def _all_output(results: list[Result]) -> str:
    return "".join(r.stdout + r.stderr for r in results)


def test_enqueues_over_url_are_signed_with_the_secret_from_the_flag_or_the_environment(
    http_sqew: Sqew,
) -> None:
    q = http_sqew.name("signed")
    http_sqew.arrange(q, hmac_secret=SECRET).close()
    env = {"SQEW_HMAC_SECRET": SECRET}
    flag, after, from_env, batch, human = (
        http_sqew.run("--json", "--hmac-secret", SECRET, "message", "enqueue", "--queue", q,
                      "--payload", '{"n":1}'),
        http_sqew.run("--json", "message", "enqueue", "--queue", q, "--payload", '{"n":2}',
                      "--hmac-secret", SECRET),  # a global option after the command
        http_sqew.run("--json", "message", "enqueue", "--queue", q, "--payload", '{"n":3}',
                      env=env),
        http_sqew.run("--json", "message", "enqueue", "--queue", q, "--file", "-",
                      stdin='{"n":4}\n{"n":5}\n', env=env),
        http_sqew.run("message", "enqueue", "--queue", q, "--payload", '{"n":6}', env=env),
    )
    for result in (flag, after, from_env, batch, human):
        assert result.returncode == 0 and result.stderr == "", str(result)
    assert flag.json() == {"message_id": http_sqew.id(1), "duplicate": False}
    assert batch.json() == {"enqueued": 2, "duplicates": 0, "failed": []}
    polled = http_sqew.json("message", "poll", "--queue", q, "--batch", "10")
    assert [m["payload"] for m in polled["messages"]] == [{"n": i} for i in range(1, 7)]
    for m in polled["messages"]:  # leased messages carry the signature of the payload text
        text = f'{{"n":{m["payload"]["n"]}}}'.encode()
        assert m["signature"] == hmac.new(SECRET.encode(), text, hashlib.sha256).hexdigest()
    assert SECRET not in _all_output([flag, after, from_env, batch, human])


def test_without_the_right_secret_an_enqueue_over_url_fails_in_one_line(
    http_sqew: Sqew,
) -> None:
    q = http_sqew.name("signed")
    http_sqew.arrange(q, hmac_secret=SECRET).close()
    none, wrong, wrong_env, wrong_json, file_ = (
        http_sqew.run("message", "enqueue", "--queue", q, "--payload", "1"),
        http_sqew.run("--hmac-secret", "not-the-secret-at-all", "message", "enqueue",
                      "--queue", q, "--payload", "1"),
        http_sqew.run("message", "enqueue", "--queue", q, "--payload", "1",
                      env={"SQEW_HMAC_SECRET": SECRET + "x"}),
        http_sqew.run("--json", "--hmac-secret", SECRET + "y", "message", "enqueue",
                      "--queue", q, "--payload", "1"),
        http_sqew.run("--json", "message", "enqueue", "--queue", q, "--file", "-",
                      stdin="1\n2\n", env={"SQEW_HMAC_SECRET": SECRET + "z"}),
    )
    for result in (none, wrong, wrong_env, wrong_json, file_):
        http_sqew.assert_failed(result, "InvalidSignature")
    assert "takes signed enqueues only" in none.stderr and "X-Sqew-Signature" in none.stderr
    assert "does not match" in wrong.stderr
    assert "stopped at line 1" in file_.stderr
    assert SECRET not in _all_output([none, wrong, wrong_env, wrong_json, file_])
    assert http_sqew.json("stats", "--queue", q)["enqueued_total"] == 0


def test_a_local_file_needs_no_signature(local_sqew: Sqew) -> None:
    """The owner of the database file is trusted: with or without the secret, it enqueues."""
    local_sqew.arrange("signed", hmac_secret=SECRET).close()
    local_sqew.ok("message", "enqueue", "--queue", "signed", "--payload", "1")
    local_sqew.ok("--hmac-secret", SECRET, "message", "enqueue", "--queue", "signed",
                  "--payload", "2")
    assert local_sqew.json("stats", "--queue", "signed")["ready"] == 2


def test_help_never_shows_the_secret_from_the_environment(local_sqew: Sqew) -> None:
    env = {"SQEW_HMAC_SECRET": SECRET}
    shown = [local_sqew.run("--help", env=env, use_db=False),
             local_sqew.run("message", "enqueue", "--help", env=env, use_db=False)]
    for result in shown:
        assert result.returncode == 0, str(result)
    assert "--hmac-secret" in shown[0].stdout and "SQEW_HMAC_SECRET" in shown[0].stdout
    assert SECRET not in _all_output(shown)


def _payload_as_sent_verifies(sqew_: Sqew, env: dict[str, str]) -> None:
    q = sqew_.name("spaced")
    sqew_.arrange(q, hmac_secret=SECRET).close()
    text = '{"n":  7, "s": "x"}'  # not compact: the signature covers exactly this text
    sent = sqew_.run("message", "enqueue", "--queue", q, "--payload", text, env=env)
    assert sent.returncode == 0, str(sent)
    polled = sqew_.run("--json", "message", "poll", "--queue", q)
    assert polled.returncode == 0, str(polled)
    assert f'"payload":{text}' in polled.stdout  # as the REST API's poll answer shows it
    (m,) = polled.json()["messages"]
    assert m["signature"] == hmac.new(SECRET.encode(), text.encode(), hashlib.sha256).hexdigest()


def test_poll_json_prints_the_payload_text_its_signature_covers_over_url(
    http_sqew: Sqew,
) -> None:
    _payload_as_sent_verifies(http_sqew, {"SQEW_HMAC_SECRET": SECRET})


def test_poll_json_prints_the_payload_text_its_signature_covers_locally(
    local_sqew: Sqew,
) -> None:
    _payload_as_sent_verifies(local_sqew, {})
