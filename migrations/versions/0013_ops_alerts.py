"""ops alerts through webhooks

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04

"""
from alembic import op  # noqa: F401
import sqlalchemy as sa  # noqa: F401


# revision identifiers, used by Alembic.
revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None


def upgrade():
    pass


def downgrade():
    pass
