"""These tests run on the targets whose client is a ``sqew.Client`` itself."""

from __future__ import annotations

import pytest
from targets import SYNC_TARGETS, TargetSpec


@pytest.fixture(params=[spec.param for spec in SYNC_TARGETS])
def target_spec(request: pytest.FixtureRequest) -> TargetSpec:
    """The current entry of ``SYNC_TARGETS``."""
    spec: TargetSpec = request.param
    return spec
