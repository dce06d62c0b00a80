"""preview links: unguessable, expiring, revocable links to a draft or scheduled post

Only the token's SHA-256 is stored. revision_id is room for a link to a pending revision
(nullable, unused yet).

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-08

"""
import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = '0021'
down_revision = '0020'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'preview_links',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('post_id', sa.Integer(), nullable=False),
        sa.Column('revision_id', sa.BigInteger(), nullable=True),
        sa.Column('token_hash', sa.String(length=64), nullable=False),
        sa.Column('created_by_id', sa.Integer(), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(['post_id'], ['posts.id'], ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['created_by_id'], ['users.id'], ondelete='SET NULL'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('token_hash'),
    )
    with op.batch_alter_table('preview_links', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_preview_links_post_id'), ['post_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_preview_links_expires_at'), ['expires_at'],
                              unique=False)


def downgrade():
    with op.batch_alter_table('preview_links', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_preview_links_expires_at'))
        batch_op.drop_index(batch_op.f('ix_preview_links_post_id'))
    op.drop_table('preview_links')
