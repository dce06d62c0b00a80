"""publishing and timer freezes

An admin pauses all publishing, or all timers, with a reason; the leaders keep their
keys and do nothing for that scope until the row is deleted on resume.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'freezes',
        sa.Column('scope', sa.String(length=16), nullable=False),
        sa.Column('reason', sa.String(length=500), nullable=False),
        sa.Column('frozen_by', sa.String(length=254), nullable=False),
        sa.Column('frozen_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('on_resume', sa.String(length=16), nullable=False),
        sa.PrimaryKeyConstraint('scope'),
    )


def downgrade():
    op.drop_table('freezes')
