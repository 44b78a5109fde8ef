"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table('queues',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('name', sa.String(length=100), nullable=False),
    sa.Column('parent_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('visibility_ms', sa.BigInteger(), nullable=False),
    sa.Column('max_attempts', sa.Integer(), nullable=False),
    sa.Column('backoff_base_ms', sa.BigInteger(), nullable=False),
    sa.Column('backoff_max_ms', sa.BigInteger(), nullable=False),
    sa.Column('retention_ms', sa.BigInteger(), nullable=False),
    sa.Column('dedup_window_ms', sa.BigInteger(), nullable=False),
    sa.Column('max_payload_bytes', sa.Integer(), nullable=False),
    sa.Column('max_depth', sa.BigInteger(), nullable=False),
    sa.Column('rate_limit_per_s', sa.Float(), nullable=False),
    sa.Column('lifo', sa.Boolean(), nullable=False),
    sa.Column('archive', sa.Boolean(), nullable=False),
    sa.Column('hmac_secret', sa.Text(), nullable=True),
    sa.Column('created_at', sa.BigInteger(), nullable=False),
    sa.Column('depth', sa.BigInteger(), server_default=sa.text('0'), nullable=False),
    sa.Column('enqueued_total', sa.BigInteger(), server_default=sa.text('0'), nullable=False),
    sa.Column('acked_total', sa.BigInteger(), server_default=sa.text('0'), nullable=False),
    sa.Column('nacked_total', sa.BigInteger(), server_default=sa.text('0'), nullable=False),
    sa.Column('dead_lettered_total', sa.BigInteger(), server_default=sa.text('0'), nullable=False),
    sa.Column('expired_total', sa.BigInteger(), server_default=sa.text('0'), nullable=False),
    sa.Column('rl_tokens', sa.Float(), server_default=sa.text('0'), nullable=False),
    sa.Column('rl_at', sa.BigInteger(), server_default=sa.text('0'), nullable=False),
    sa.ForeignKeyConstraint(['parent_id'], ['queues.id'], name=op.f('fk_queues_parent_id_queues'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_queues')),
    sa.UniqueConstraint('name', name=op.f('uq_queues_name')),
    sqlite_autoincrement=True
    )
    op.create_table('archive',
    sa.Column('id', sa.BigInteger(), autoincrement=False, nullable=False),
    sa.Column('queue_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('payload', sa.Text(), nullable=False),
    sa.Column('priority', sa.Integer(), nullable=False),
    sa.Column('attributes', sa.Text(), nullable=True),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('enqueued_at', sa.BigInteger(), nullable=False),
    sa.Column('acked_at', sa.BigInteger(), nullable=False),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.ForeignKeyConstraint(['queue_id'], ['queues.id'], name=op.f('fk_archive_queue_id_queues'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_archive'))
    )
    with op.batch_alter_table('archive', schema=None) as batch_op:
        batch_op.create_index('ix_archive_queue_id', ['queue_id', 'id'], unique=False)

    op.create_table('dedup',
    sa.Column('queue_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('key', sa.String(length=128), nullable=False),
    sa.Column('message_id', sa.BigInteger(), nullable=False),
    sa.Column('expires_at', sa.BigInteger(), nullable=False),
    sa.ForeignKeyConstraint(['queue_id'], ['queues.id'], name=op.f('fk_dedup_queue_id_queues'), ondelete='CASCADE'),
    sa.UniqueConstraint('queue_id', 'key', name=op.f('uq_dedup_queue_id_key'))
    )
    with op.batch_alter_table('dedup', schema=None) as batch_op:
        batch_op.create_index('ix_dedup_expires_at', ['expires_at'], unique=False)

    op.create_table('messages',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('queue_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('payload', sa.Text(), nullable=False),
    sa.Column('priority', sa.Integer(), nullable=False),
    sa.Column('attributes', sa.Text(), nullable=True),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('enqueued_at', sa.BigInteger(), nullable=False),
    sa.Column('available_at', sa.BigInteger(), nullable=False),
    sa.Column('expires_at', sa.BigInteger(), nullable=False),
    sa.Column('lease_expires_at', sa.BigInteger(), nullable=True),
    sa.Column('token', sa.String(length=64), nullable=True),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('lifo', sa.Boolean(), nullable=False),
    sa.Column('origin_queue', sa.String(length=100), nullable=True),
    sa.ForeignKeyConstraint(['queue_id'], ['queues.id'], name=op.f('fk_messages_queue_id_queues'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_messages')),
    sqlite_autoincrement=True
    )
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.create_index('ix_messages_claim_fifo', ['queue_id', sa.literal_column('priority DESC'), 'available_at', 'id', 'expires_at'], unique=False, sqlite_where=sa.text('lease_expires_at IS NULL AND lifo = 0'), postgresql_where=sa.text('lease_expires_at IS NULL AND lifo = false'))
        batch_op.create_index('ix_messages_claim_lifo', ['queue_id', sa.literal_column('priority DESC'), sa.literal_column('id DESC'), 'available_at', 'expires_at'], unique=False, sqlite_where=sa.text('lease_expires_at IS NULL AND lifo = 1'), postgresql_where=sa.text('lease_expires_at IS NULL AND lifo = true'))
        batch_op.create_index('ix_messages_expiry', ['queue_id', 'expires_at'], unique=False)
        batch_op.create_index('ix_messages_leased', ['queue_id', 'lease_expires_at'], unique=False, sqlite_where=sa.text('lease_expires_at IS NOT NULL'), postgresql_where=sa.text('lease_expires_at IS NOT NULL'))




def downgrade() -> None:

    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.drop_index('ix_messages_leased', sqlite_where=sa.text('lease_expires_at IS NOT NULL'), postgresql_where=sa.text('lease_expires_at IS NOT NULL'))
        batch_op.drop_index('ix_messages_expiry')
        batch_op.drop_index('ix_messages_claim_lifo', sqlite_where=sa.text('lease_expires_at IS NULL AND lifo = 1'), postgresql_where=sa.text('lease_expires_at IS NULL AND lifo = true'))
        batch_op.drop_index('ix_messages_claim_fifo', sqlite_where=sa.text('lease_expires_at IS NULL AND lifo = 0'), postgresql_where=sa.text('lease_expires_at IS NULL AND lifo = false'))

    op.drop_table('messages')
    with op.batch_alter_table('dedup', schema=None) as batch_op:
        batch_op.drop_index('ix_dedup_expires_at')

    op.drop_table('dedup')
    with op.batch_alter_table('archive', schema=None) as batch_op:
        batch_op.drop_index('ix_archive_queue_id')

    op.drop_table('archive')
    op.drop_table('queues')

