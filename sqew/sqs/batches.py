"""The batch actions: SendMessageBatch, DeleteMessageBatch, ChangeMessageVisibilityBatch.

A batch holds 1 to 10 entries with distinct ids of 1-80 characters of ``A-Z a-z 0-9 _ -``
(else the whole request fails: ``EmptyBatchRequest``, ``TooManyEntriesInBatchRequest``,
``BatchEntryIdsNotDistinct``, ``InvalidBatchEntryId``); a send batch's messages total at most
256 KiB (``BatchRequestTooLong``). An entry that is wrong on its own fails alone, in
``Failed``, and the others go on: a send batch's valid messages are enqueued together.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from sqew import errors, models
from sqew.sqs import envelope, handles, messaging
from sqew.sqs.errors import SqsError, invalid
from sqew.sqs.urls import Context, queue_name

Params = dict[str, Any]
MAX_ENTRIES = 10
MAX_BATCH_BYTES = 262_144
_ENTRY_ID = re.compile(r"[A-Za-z0-9_-]{1,80}")
Sent = tuple[str, envelope.Parts, models.MessageIn]
"""A send batch's valid entry: its id, its parts and the message that stores them."""


def entries(p: Params, kind: str) -> list[Params]:
    """A batch's entries, checked as a whole (see the module's docstring).

    Raises:
        SqsError: the batch's error.
    """
    got: list[Params] = p["Entries"]
    if not got:
        raise SqsError("EmptyBatchRequest",
                       f"There should be at least one {kind}RequestEntry in the request.")
    if len(got) > MAX_ENTRIES:
        raise SqsError("TooManyEntriesInBatchRequest",
                       f"Maximum number of entries per request are {MAX_ENTRIES}. You have "
                       f"sent {len(got)}.")
    seen: set[str] = set()
    for entry in got:
        if not _ENTRY_ID.fullmatch(entry["Id"]):
            raise SqsError("InvalidBatchEntryId",
                           "A batch entry id can only contain alphanumeric characters, hyphens "
                           "and underscores. It can be at most 80 letters long.")
        if entry["Id"] in seen:
            raise SqsError("BatchEntryIdsNotDistinct", f"Id {entry['Id']} repeated.")
        seen.add(entry["Id"])
    return got


def failed(entry_id: str, exc: SqsError) -> Params:
    """A ``Failed`` entry."""
    return {"Id": entry_id, "SenderFault": exc.sender, "Code": exc.code, "Message": exc.message}


async def send_message_batch(ctx: Context, p: Params) -> Params:
    """SendMessageBatch: the valid entries enqueued together, the others failed."""
    name = queue_name(p["QueueUrl"])
    ok: list[Sent] = []
    groups: dict[str, str | None] = {}
    bad: list[Params] = []
    total = 0
    given = entries(p, "SendMessageBatch")
    is_fifo, data = await messaging.send_data(
        ctx, name, {} if any("DelaySeconds" not in e for e in given) else given[0])
    for entry in given:
        try:
            parts, size = messaging.parts_of(entry)
            message, groups[entry["Id"]] = messaging.fifo_message(
                entry, parts, is_fifo, data, ctx.max_json_depth)
        except SqsError as exc:
            bad.append(failed(entry["Id"], exc))
            continue
        total += size
        ok.append((entry["Id"], parts, message))
    if total > MAX_BATCH_BYTES:
        raise SqsError("BatchRequestTooLong", f"Batch requests cannot be longer than "
                       f"{MAX_BATCH_BYTES} bytes. You have sent {total} bytes.")
    results = await _enqueue(ctx, name, ok, bad, groups if is_fifo else None) if ok else []
    done = [{"Id": entry_id, **messaging.sent_fifo(parts, r.message_id, is_fifo)}
            for (entry_id, parts, _), r in results]
    return {"Successful": done, "Failed": bad}


async def _enqueue(ctx: Context, name: str, ok: list[Sent], bad: list[Params],
                   groups: dict[str, str | None] | None) -> list[tuple[Sent, models.EnqueueResult]]:
    """``ok`` enqueued together (each in its group, on a FIFO queue), each with its result;
    where the queue's payload limit refuses some, those failed one by one (added to ``bad``)
    and the others enqueued. The limit is read only then: the enqueue checks it (all or
    nothing) in its own transaction."""
    async def enqueue(sent: list[Sent]) -> list[tuple[Sent, models.EnqueueResult]]:
        return list(zip(sent, await ctx.service.enqueue(
            name, [m for *_, m in sent], messaging.UNSIGNED,
            None if groups is None else [groups[e[0]] for e in sent]), strict=True))

    try:
        return await enqueue(ok)
    except errors.PayloadTooLarge:
        pass
    limit = (await ctx.service.get_queue(name)).max_payload_bytes
    fits = [e for e in ok if len(bytes(e[2].payload)) <= limit]
    bad += [failed(e[0], invalid(f"One or more parameters are invalid. Reason: Message "
                                 f"must be shorter than {limit} bytes."))
            for e in ok if e not in fits]
    return await enqueue(fits) if fits else []


async def delete_message_batch(ctx: Context, p: Params) -> Params:
    """DeleteMessageBatch: each entry's message acked (a stale handle succeeds, as on SQS)."""
    name = queue_name(p["QueueUrl"])
    held: list[tuple[str, handles.Handle]] = []
    bad: list[Params] = []
    for entry in entries(p, "DeleteMessageBatch"):
        try:
            held.append((entry["Id"], handles.read(entry["ReceiptHandle"], name)))
        except SqsError as exc:
            bad.append(failed(entry["Id"], exc))
    if held:
        await ctx.service.ack(name, [(h.id, h.token) for _, h in held])
    return {"Successful": [{"Id": i} for i, _ in held], "Failed": bad}


async def change_message_visibility_batch(ctx: Context, p: Params) -> Params:
    """ChangeMessageVisibilityBatch: each entry's lease extended, or its entry failed."""
    name = queue_name(p["QueueUrl"])
    items: list[tuple[str, str, handles.Handle, int]] = []
    bad: list[Params] = []
    for entry in entries(p, "ChangeMessageVisibilityBatch"):
        try:
            handle = handles.read(entry["ReceiptHandle"], name)
            ms = messaging.seconds(entry, "VisibilityTimeout", 0, messaging.MAX_VISIBILITY_S,
                                   0) * 1000
        except SqsError as exc:
            bad.append(failed(entry["Id"], exc))
            continue
        items.append((entry["Id"], entry["ReceiptHandle"], handle, ms))
    results = await ctx.service.extend_leases(
        name, [(h.id, h.token, ms) for *_, h, ms in items]) if items else []
    done = []
    for (entry_id, text, _, _), result in zip(items, results, strict=True):
        try:
            messaging.raise_for(result.status, text)
            done.append({"Id": entry_id})
        except SqsError as exc:
            bad.append(failed(entry_id, exc))
    return {"Successful": done, "Failed": bad}


Action = Callable[[Context, Params], Awaitable[Params]]
ACTIONS: dict[str, Action] = {
    "SendMessageBatch": send_message_batch,
    "DeleteMessageBatch": delete_message_batch,
    "ChangeMessageVisibilityBatch": change_message_visibility_batch,
}
