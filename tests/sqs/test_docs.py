"""docs/sqs.md's examples run as written: its first three ``python`` blocks, in order, as one
script against the tests' server (the documented ``http://127.0.0.1:8888`` replaced by its URL),
and the ``sqew.testing`` one on the server it starts itself. Fragments (with a placeholder:
``…`` or ``...``) are not run."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from targets import ServerThread

DOC = Path(__file__).resolve().parents[2] / "docs" / "sqs.md"


def test_the_examples_run(server: ServerThread) -> None:
    blocks = [b for b in re.findall(r"^```python\n(.*?)^```$", DOC.read_text(),
                                    flags=re.S | re.M) if "…" not in b and "..." not in b]
    assert len(blocks) == 4  # boto3 alone; REST and SQS on one queue; FIFO; sqew.testing
    script = "\n".join(blocks[:3]).replace("http://127.0.0.1:8888", server.url)
    scope: dict[str, object] = {}
    exec(compile(script, str(DOC), "exec"), scope)
    sqs: Any = scope["sqs"]
    names = [u.rsplit("/", 1)[1] for u in sqs.list_queues().get("QueueUrls", [])]
    assert not {"orders", "payments.fifo"} & set(names)  # the examples cleaned up
    sqs.close()


def test_the_testing_example_runs() -> None:
    blocks = re.findall(r"^```python\n(.*?)^```$", DOC.read_text(), flags=re.S | re.M)
    (example,) = [b for b in blocks if "sqew.testing.serve()" in b]
    exec(compile(example, str(DOC), "exec"), {})
