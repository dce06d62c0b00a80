"""the site's time zone and language, set in Site settings

Two nullable columns on the one settings row: None means the environment's default
(SITE_TIMEZONE, SITE_LANGUAGE). Added alone and nullable, so no table rewrite and no
lock past the catalog's.

Revision ID: 0033
Revises: 0030
Create Date: 2026-12-03

"""
import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = '0033'
down_revision = '0030'
branch_labels = None
depends_on = None


def upgrade():
    op.add_column('site_state', sa.Column('timezone', sa.String(length=64), nullable=True))
    op.add_column('site_state', sa.Column('language', sa.String(length=35), nullable=True))


def downgrade():
    op.drop_column('site_state', 'language')
    op.drop_column('site_state', 'timezone')
