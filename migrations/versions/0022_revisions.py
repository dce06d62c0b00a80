"""post revisions (every version of a post's text) and scheduled changes to live posts

Every post starts its history with the text it has: copied in batches of 1,000 posts,
each committed alone, after the tables are made, where one INSERT … SELECT of every post
used to hold the new tables' locks on posts until it ended. The release copies for a few
seconds and the fleet does the rest (webapp/ops/release/backfills.py); the code runs
before it ends: a post not copied yet has no history yet, and its next save starts one.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-08

"""
import sqlalchemy as sa
from alembic import op

from webapp.ops.release import steps

# revision identifiers, used by Alembic.
revision = '0022'
down_revision = '0021'
branch_labels = None
depends_on = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')
# a batch of posts (after < id <= upto) that have no revision yet, in the order of their ids
IMPORT = """
INSERT INTO post_revisions (post_id, title, body, author, reason, was_live, created_at)
SELECT id, title, body, '', 'import', status = 'published', updated_at FROM posts p
WHERE p.id > :after AND p.id <= :upto
  AND NOT EXISTS (SELECT 1 FROM post_revisions r WHERE r.post_id = p.id)
ORDER BY p.id
"""


def upgrade():
    op.create_table(
        'post_revisions',
        sa.Column('id', BIG_ID, nullable=False),
        sa.Column('post_id', sa.Integer(), nullable=False),
        sa.Column('title', sa.String(length=200), nullable=False),
        sa.Column('body', sa.Text(), nullable=False),
        sa.Column('author_id', sa.Integer(), nullable=True),
        sa.Column('author', sa.String(length=254), nullable=False),
        sa.Column('reason', sa.String(length=16), nullable=False),
        sa.Column('restored_from', sa.BigInteger(), nullable=True),
        sa.Column('was_live', sa.Boolean(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['post_id'], ['posts.id'], ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['author_id'], ['users.id'], ondelete='SET NULL'),
        sa.PrimaryKeyConstraint('id'),
        if_not_exists=True,  # a release tried again after the copy began finds it
    )
    op.create_index('ix_post_revisions_post_id_id', 'post_revisions', ['post_id', 'id'],
                    if_not_exists=True)
    op.create_table(
        'scheduled_changes',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('post_id', sa.Integer(), nullable=False),
        sa.Column('title', sa.String(length=200), nullable=False),
        sa.Column('body', sa.Text(), nullable=False),
        sa.Column('apply_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('base_version', sa.Integer(), nullable=False),
        sa.Column('base_digest', sa.String(length=32), nullable=False),
        sa.Column('author_id', sa.Integer(), nullable=True),
        sa.Column('author', sa.String(length=254), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['post_id'], ['posts.id'], ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['author_id'], ['users.id'], ondelete='SET NULL'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('post_id'),
        if_not_exists=True,
    )
    op.create_index('ix_scheduled_changes_apply_at', 'scheduled_changes', ['apply_at'],
                    if_not_exists=True)
    # every post starts its history with the text it has now, by nobody known
    steps.backfill('post history', IMPORT, table='posts')


def downgrade():
    op.drop_index('ix_scheduled_changes_apply_at', table_name='scheduled_changes')
    op.drop_table('scheduled_changes')
    op.drop_index('ix_post_revisions_post_id_id', table_name='post_revisions')
    op.drop_table('post_revisions')
