"""docs/sqs.md's examples run as written: its ``python`` blocks, in order, as one script against
the tests' server (the documented ``http://127.0.0.1:8888`` replaced by its URL)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from targets import ServerThread

DOC = Path(__file__).resolve().parents[2] / "docs" / "sqs.md"


def test_the_examples_run(server: ServerThread) -> None:
    blocks = re.findall(r"^```python\n(.*?)^```$", DOC.read_text(), flags=re.S | re.M)
    assert len(blocks) == 2  # boto3 alone; REST and SQS on one queue
    script = "\n".join(blocks).replace("http://127.0.0.1:8888", server.url)
    scope: dict[str, object] = {}
    exec(compile(script, str(DOC), "exec"), scope)
    sqs: Any = scope["sqs"]
    names = [u.rsplit("/", 1)[1] for u in sqs.list_queues().get("QueueUrls", [])]
    assert "orders" not in names  # the example cleaned up after itself
    sqs.close()
