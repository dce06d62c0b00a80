"""audit log of every change made by a person or a token

One row per change, written in the change's own transaction: who (the user, and their
email kept even if the user goes), when, from which address, through the web, the API
(and which token) or the command line, the action, its target and what changed.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04

"""
import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'audit_events',
        sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
        sa.Column('at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('actor_id', sa.Integer(), nullable=True),
        sa.Column('actor', sa.String(length=254), nullable=False),
        sa.Column('via', sa.String(length=8), nullable=False),
        sa.Column('token_id', sa.Integer(), nullable=True),
        sa.Column('address', sa.String(length=64), nullable=False),
        sa.Column('action', sa.String(length=40), nullable=False),
        sa.Column('target', sa.String(length=300), nullable=False),
        sa.Column('detail', sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(['actor_id'], ['users.id'], ondelete='SET NULL'),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_audit_events_at', 'audit_events', ['at'], unique=False)
    op.create_index('ix_audit_events_actor_at', 'audit_events', ['actor', 'at'], unique=False)
    op.create_index('ix_audit_events_action_at', 'audit_events', ['action', 'at'], unique=False)


def downgrade():
    op.drop_index('ix_audit_events_action_at', table_name='audit_events')
    op.drop_index('ix_audit_events_actor_at', table_name='audit_events')
    op.drop_index('ix_audit_events_at', table_name='audit_events')
    op.drop_table('audit_events')
