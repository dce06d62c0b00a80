"""the public site: its name and description, and the version its pages validate against

One row (id 1), written on the first change: name and description (NULL: SITE_NAME /
SITE_DESCRIPTION from the environment), version and changed_at bumped in the same
transaction as every change readers see (a post published, unpublished or edited while
published, or the settings), settings_version and settings_changed_at by the settings only.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-05

"""
import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'site_state',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('name', sa.String(length=100), nullable=True),
        sa.Column('description', sa.String(length=300), nullable=True),
        sa.Column('version', sa.BigInteger(), nullable=False, server_default='0'),
        sa.Column('changed_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('settings_version', sa.BigInteger(), nullable=False, server_default='0'),
        sa.Column('settings_changed_at', sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint('id'),
    )


def downgrade():
    op.drop_table('site_state')
