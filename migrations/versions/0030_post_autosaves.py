"""editors' unsaved text, kept by the server beside the post (autosave)

A new table, one row per post and user (post_id NULL: the user's New post form); no
lock on any other table.

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-16

"""
import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = '0030'
down_revision = '0029'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'post_autosaves',
        sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'),
                  autoincrement=True, nullable=False),
        sa.Column('user_id', sa.Integer(), nullable=False),
        sa.Column('post_id', sa.Integer(), nullable=True),
        sa.Column('base_version', sa.Integer(), nullable=True),
        sa.Column('base_digest', sa.String(length=32), nullable=False),
        sa.Column('title', sa.Text(), nullable=False),
        sa.Column('slug', sa.Text(), nullable=False),
        sa.Column('body', sa.Text(), nullable=False),
        sa.Column('publish_at', sa.String(length=64), nullable=False),
        sa.Column('zone', sa.String(length=64), nullable=False),
        sa.Column('saved_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['post_id'], ['posts.id'], ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['user_id'], ['users.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('user_id', 'post_id', name='uq_post_autosaves_user_id_post_id'),
    )


def downgrade():
    op.drop_table('post_autosaves')
