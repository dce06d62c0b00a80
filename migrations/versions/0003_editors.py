"""editors

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29

"""
from alembic import op  # noqa: F401
import sqlalchemy as sa  # noqa: F401


# revision identifiers, used by Alembic.
revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade():
    pass


def downgrade():
    pass
