"""deploys recorded by the release phase

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04

"""
from alembic import op  # noqa: F401
import sqlalchemy as sa  # noqa: F401


# revision identifiers, used by Alembic.
revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade():
    pass


def downgrade():
    pass
