"""publishing and timer freezes

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04

"""
from alembic import op  # noqa: F401
import sqlalchemy as sa  # noqa: F401


# revision identifiers, used by Alembic.
revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade():
    pass


def downgrade():
    pass
