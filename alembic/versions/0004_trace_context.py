"""the producer's trace context on messages and archived messages

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None

# Nullable columns: added in place on SQLite and PostgreSQL alike (no table rebuild), and
# existing rows simply have no trace context.
_COLUMNS = (('traceparent', 55), ('tracestate', 512))


def upgrade() -> None:
    for table in ('messages', 'archive'):
        for name, length in _COLUMNS:
            op.add_column(table, sa.Column(name, sa.String(length), nullable=True))


def downgrade() -> None:
    for table in ('messages', 'archive'):
        with op.batch_alter_table(table) as batch:
            for name, _ in _COLUMNS:
                batch.drop_column(name)
