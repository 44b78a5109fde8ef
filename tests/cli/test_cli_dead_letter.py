"""``sqew message nack --dead-letter``: a permanent failure, to the DLQ at once."""

from __future__ import annotations


def test_nack_dead_letter_moves_to_the_dlq_with_the_error(sqew) -> None:
    q = sqew.name("q")
    with sqew.arrange(q, max_attempts=5) as client:
        client.enqueue_batch(q, [{"payload": n} for n in range(3)])
    id1, id2, id3 = sqew.id(1), sqew.id(2), sqew.id(3)
    h1, h2, h3 = sqew.handles(sqew.json("message", "get", "--queue", q, "--batch", "3"))

    one = sqew.json("message", "nack", "--queue", q, "--ids", h1, "--dead-letter",
                    "--error", "no such customer")
    assert one == {"results": [{"id": id1, "status": "dead_lettered"}]}
    both = sqew.ok("message", "nack", "--queue", q, "--ids", f"{h2},{h3}", "--dead-letter")
    assert both.stdout.split() == [str(id2), "dead_lettered", str(id3), "dead_lettered"]

    dead = sqew.json("dlq", "list", "--queue", q)["messages"]
    assert [(m["id"], m["attempts"], m["last_error"]) for m in dead] == [
        (id1, 1, "no such customer"), (id2, 1, None), (id3, 1, None)]
    assert sqew.json("stats", "--queue", q)["dead_lettered_total"] == 3


def test_nack_dead_letter_in_a_dlq_is_an_error(sqew) -> None:
    q = sqew.name("q")
    with sqew.arrange(q) as client:
        client.enqueue(q, 1)
        (m,) = client.poll(q)
        client.nack(q, m.id, m.token, dead_letter=True)
    (handle,) = sqew.handles(sqew.json("message", "get", "--queue", f"{q}.dlq"))
    sqew.fails("message", "nack", "--queue", f"{q}.dlq", "--ids", handle, "--dead-letter",
               code="ValidationError")
