"""releases: a named set of changes to posts and the site's settings, live at one time

Two new tables, nothing else touched.

Revision ID: 0035
Revises: 0034
Create Date: 2026-12-03

"""
import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = '0035'
down_revision = '0034'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'releases',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('name', sa.String(length=200), nullable=False),
        sa.Column('release_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('status', sa.String(length=16), nullable=False),
        sa.Column('version', sa.Integer(), nullable=False),
        sa.Column('author_id', sa.Integer(), nullable=True),
        sa.Column('author', sa.String(length=254), nullable=False),
        sa.Column('published_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('result', sa.JSON(), nullable=True),
        sa.Column('preview_hash', sa.String(length=64), nullable=True),
        sa.Column('preview_expires_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['author_id'], ['users.id'], ondelete='SET NULL'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('preview_hash'),
    )
    op.create_index('ix_releases_due', 'releases', ['release_at'],
                    postgresql_where=sa.text("status = 'scheduled'"),
                    sqlite_where=sa.text("status = 'scheduled'"))
    op.create_table(
        'release_items',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('release_id', sa.Integer(), nullable=False),
        sa.Column('kind', sa.String(length=16), nullable=False),
        sa.Column('post_id', sa.Integer(), nullable=True),
        sa.Column('title', sa.String(length=200), nullable=True),
        sa.Column('body', sa.Text(), nullable=True),
        sa.Column('site_name', sa.String(length=100), nullable=True),
        sa.Column('site_description', sa.String(length=300), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['release_id'], ['releases.id'], ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['post_id'], ['posts.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('release_id', 'post_id', name='uq_release_items_post'),
    )
    op.create_index('ix_release_items_post_id', 'release_items', ['post_id'])


def downgrade():
    op.drop_table('release_items')
    op.drop_table('releases')
