"""the scan's index on dedup (queue_id, message_id)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index('ix_dedup_message', 'dedup', ['queue_id', 'message_id'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_dedup_message', table_name='dedup')
