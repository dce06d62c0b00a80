"""audit log of every change made by a person or a token

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04

"""
from alembic import op  # noqa: F401
import sqlalchemy as sa  # noqa: F401


# revision identifiers, used by Alembic.
revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade():
    pass


def downgrade():
    pass
