"""requests counted per address before any proof: unknown API tokens, passkey challenges

A new table (no lock on any other), read and written by webapp.accounts.ratelimit.

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-14

"""
import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = '0027'
down_revision = '0026'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'rate_limit_hits',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('kind', sa.String(length=32), nullable=False),
        sa.Column('address', sa.String(length=64), nullable=False),
        sa.Column('at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id'),
    )
    with op.batch_alter_table('rate_limit_hits', schema=None) as batch_op:
        batch_op.create_index('ix_rate_limit_hits_kind_address_at', ['kind', 'address', 'at'],
                              unique=False)
        batch_op.create_index('ix_rate_limit_hits_kind_at', ['kind', 'at'], unique=False)


def downgrade():
    op.drop_table('rate_limit_hits')
