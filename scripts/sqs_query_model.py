"""Write sqew/sqs/querymodel/: the SQS service model of AWS's Query protocol, from a botocore
release that still described SQS with it (botocore 1.31.x: later releases describe SQS with the
JSON 1.0 protocol and dropped the Query names). Documentation strings are left out.

    pip download --no-deps -d /tmp/old botocore==1.31.60
    unzip -q /tmp/old/botocore-1.31.60-*.whl 'botocore/data/sqs/*' -d /tmp/old
    python scripts/sqs_query_model.py /tmp/old/botocore/data/sqs/2012-11-05/service-2.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

TARGET = Path(__file__).resolve().parents[1] / "sqew/sqs/querymodel/sqs/2012-11-05/service-2.json"


def strip(value: Any) -> Any:
    """``value`` without its documentation strings."""
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items()
                if k not in ("documentation", "documentationUrl")}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


def main(source: str) -> None:
    """Write the stripped model of ``source`` (an old botocore's sqs service-2.json)."""
    model = json.loads(Path(source).read_text())
    if model["metadata"]["protocol"] != "query":
        raise SystemExit(f"{source} is not a Query protocol model")
    TARGET.write_text(json.dumps(strip(model), indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
