"""cache purges: each outbox event's surrogate keys, one row per configured purger

A new table (no lock on any other): the plugin leader writes a row per purger in the
transaction that marks an event processed, and one sender per purger purges them
(webapp.plugins.purges).

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-12

"""
import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = '0024'
down_revision = '0023'
branch_labels = None
depends_on = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')
WHEN = sa.DateTime(timezone=True)


def upgrade():
    op.create_table(
        'cache_purges',
        sa.Column('id', BIG_ID, nullable=False),
        sa.Column('purger', sa.String(length=300), nullable=False),
        sa.Column('event_id', BIG_ID, nullable=True),
        sa.Column('topic', sa.String(length=64), nullable=False),
        sa.Column('keys', sa.Text(), nullable=False),
        sa.Column('hard', sa.Boolean(), nullable=False),
        sa.Column('status', sa.String(length=16), nullable=False),
        sa.Column('attempts', sa.Integer(), nullable=False),
        sa.Column('next_attempt_at', WHEN, nullable=True),
        sa.Column('claim', sa.String(length=32), server_default='', nullable=False),
        sa.Column('claimed_at', WHEN, nullable=True),
        sa.Column('claimed_term', sa.Integer(), server_default='0', nullable=False),
        sa.Column('claimed_holder', sa.String(length=200), server_default='', nullable=False),
        sa.Column('last_error', sa.String(length=500), server_default='', nullable=False),
        sa.Column('done_at', WHEN, nullable=True),
        sa.Column('created_at', WHEN, nullable=False),
        sa.Column('replica_lsn', sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(['event_id'], ['outbox_events.id'], ondelete='SET NULL'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('purger', 'event_id', name='uq_cache_purges_purger_event'),
    )
    with op.batch_alter_table('cache_purges', schema=None) as batch_op:
        batch_op.create_index('ix_cache_purges_event_id', ['event_id'], unique=False)
        batch_op.create_index('ix_cache_purges_status', ['status'], unique=False)
        batch_op.create_index('ix_cache_purges_purger_pending', ['purger', 'next_attempt_at'],
                              unique=False, postgresql_where=sa.text("status = 'pending'"),
                              sqlite_where=sa.text("status = 'pending'"))


def downgrade():
    op.drop_table('cache_purges')
