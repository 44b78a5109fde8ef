"""``sqew keys``: mint, list and revoke API keys (docs/cli.md, "API keys").

On a database file (``--db``) these need no key: whoever may write the file owns the store (its
permissions are the boundary), which is how the first admin key is minted before any server
runs. Over ``--url`` they are requests like any other (``--api-key`` of an admin key, once the
server enforces keys).
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from sqew import errors, locations, models
from sqew.cli import output, params
from sqew.cli.state import current

app = typer.Typer(
    help="Mint, list and revoke API keys (on --db, without a key: the first key is made so).",
    no_args_is_help=True,
)

STORE_IT_NOW = "store this key now: it is never shown again (sqew keeps only its hash)"
STORE_IT_NOW_SQS = "store this secret now: it is never shown again"


@app.command("create")
def create(
    ctx: typer.Context,
    scope: Annotated[list[str], typer.Option(
        "--scope", "-s", metavar="SCOPE,…",
        help="What the key may do: produce, consume and/or admin (comma-separated or "
             "repeated).")],
    name: Annotated[str | None, typer.Option(
        "--name", "-n", metavar="NAME", help="A label for the key (1-100 characters).")] = None,
    queue: Annotated[str | None, typer.Option(
        "--queue", "-q", metavar="NAME",
        help="Bind the key to this queue (and its DLQ); default: every queue.")] = None,
    sqs: Annotated[bool, typer.Option(
        "--sqs", help="An SQS access key (access key id and secret, for AWS SDKs' SigV4 "
                      "signatures) instead of a bearer key.")] = False,
) -> None:
    """Mint an API key and print it, once: store it now, it is never shown again.

    The key alone goes to stdout (with --json, the REST API's answer), what it is and the
    reminder to store it to stderr, so the key can be captured. Only its hash is stored.
    Scopes: produce (enqueue), consume (poll, ack, nack, extend-lease, peek, get), admin
    (everything, keys included). On --db this needs no key: it mints the first admin key.
    With --sqs it mints an SQS access key for the SQS endpoint instead and prints
    AWS_ACCESS_KEY_ID=… and AWS_SECRET_ACCESS_KEY=… lines (with --json: "id" and "key"); its
    secret is stored as it is, as SigV4 needs it.

    Examples:

        sqew --db sqew.db keys create --name ops --scope admin

        sqew keys create --sqs --queue jobs --scope produce,consume > jobs.env

        KEY=$(sqew --json keys create --queue jobs --scope produce,consume | jq -r .key)
    """
    state = current(ctx, create=True)
    created = state.client.create_key(params.scopes(scope), name=name, queue=queue, sqs=sqs)
    if state.json:
        output.write_json(created)
    else:
        sys.stderr.write(f"created {output.key_summary(created)}\n")
        sys.stderr.flush()
        shown = (f"AWS_ACCESS_KEY_ID={created.id}\nAWS_SECRET_ACCESS_KEY={created.key}"
                 if sqs else created.key)
        sys.stdout.write(shown + "\n")  # unwrapped, whatever the terminal's width
        sys.stdout.flush()
    sys.stderr.write((STORE_IT_NOW_SQS if sqs else STORE_IT_NOW) + "\n")


@app.command("list")
def list_(ctx: typer.Context) -> None:
    """List API keys: id, name, queue, scopes, when created and last used.

    Never shows a key or its hash (only the key's creator ever sees it).

    Example:

        sqew keys list
    """
    state = current(ctx)
    keys = state.client.list_keys()
    output.emit(state, models.KeyList(keys), output.keys_table(keys))


@app.command("revoke")
def revoke(
    ctx: typer.Context,
    id: Annotated[str, typer.Option(
        "--id", metavar="ID", help="The key's id, as `sqew keys list` shows it.")],
) -> None:
    """Revoke an API key by its id.

    The key stops working at once here, and within a second on every server process.
    Prints nothing with --json (the REST API answers 204 No Content).

    Example:

        sqew keys revoke --id 3f9c2a71b0d4e865
    """
    state = current(ctx)
    state.client.revoke_key(id)
    if not state.json:
        output.line(f"revoked API key {id}")(output.console())


@app.command("open-access")
def open_access(
    ctx: typer.Context,
    yes: Annotated[bool, typer.Option(
        "--yes", help="Confirm: anyone who can reach a server on this database may use it.")
    ] = False,
) -> None:
    """Stop requiring API keys on a database that has none left (--db only).

    Once a database has had a key, servers on it require one, even after every key was
    revoked or deleted with its queue; this is the only way back to an open store. A server
    on loopback then serves anyone who can reach it (within a second); a server listening
    beyond loopback without --insecure still requires a key. Minting a key turns keys back
    on. Refused while keys exist.

    Example:

        sqew --db sqew.db keys open-access --yes
    """
    state = current(ctx)
    if state.url:
        raise errors.ValidationError(
            "keys open-access works on a database (--db) by its owner, never over --url"
        )
    if not yes:
        raise errors.ValidationError(
            "give --yes: anyone who can reach a server on this database could use every queue"
        )
    from sqew.client.local import LocalClient

    client = state.client
    assert isinstance(client, LocalClient)
    client.open_access()
    output.emit(state, {"auth_required": False}, output.line(
        f"API keys are no longer required on {locations.shown(state.db)}"))
