"""a per-queue wake-up counter, and a table of database-wide settings (auth_required)

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-27

``queues.wakeups`` is bumped by every commit that may have made a message of the queue ready
(``Tx.notify`` on SQLite): long polls of other processes watch it. ``meta`` holds settings of
the whole database; ``auth_required`` is set here when the database already has keys, so
authentication stays on from then on (see docs/security.md).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('queues', sa.Column('wakeups', sa.BigInteger(), nullable=False,
                                      server_default=sa.text('0')))
    meta = op.create_table(
        'meta',
        sa.Column('name', sa.String(64), nullable=False),
        sa.Column('value', sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint('name', name=op.f('pk_meta')),
    )
    if op.get_bind().execute(sa.text('SELECT 1 FROM api_keys LIMIT 1')).first() is not None:
        op.bulk_insert(meta, [{'name': 'auth_required', 'value': '1'}])


def downgrade() -> None:
    op.drop_table('meta')
    with op.batch_alter_table('queues') as batch:
        batch.drop_column('wakeups')
