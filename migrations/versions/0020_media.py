"""media: images in posts, their bytes in the database, addressed by SHA-256

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-08

"""
import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = '0020'
down_revision = '0019'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'media_files',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('sha256', sa.String(length=64), nullable=False),
        sa.Column('name', sa.String(length=255), nullable=False),
        sa.Column('alt', sa.String(length=500), nullable=False),
        sa.Column('content_type', sa.String(length=32), nullable=False),
        sa.Column('ext', sa.String(length=8), nullable=False),
        sa.Column('width', sa.Integer(), nullable=False),
        sa.Column('height', sa.Integer(), nullable=False),
        sa.Column('size', sa.Integer(), nullable=False),
        sa.Column('widths', sa.String(length=40), nullable=False),
        sa.Column('uploaded_by_id', sa.Integer(), nullable=True),
        sa.Column('uploaded_by', sa.String(length=254), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['uploaded_by_id'], ['users.id'], ondelete='SET NULL'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('sha256'),
    )
    with op.batch_alter_table('media_files', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_media_files_created_at'), ['created_at'],
                              unique=False)
    op.create_table(
        'media_variants',
        sa.Column('file_id', sa.Integer(), nullable=False),
        sa.Column('variant', sa.String(length=8), nullable=False),
        sa.Column('width', sa.Integer(), nullable=False),
        sa.Column('height', sa.Integer(), nullable=False),
        sa.Column('data', sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(['file_id'], ['media_files.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('file_id', 'variant'),
    )


def downgrade():
    op.drop_table('media_variants')
    with op.batch_alter_table('media_files', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_media_files_created_at'))
    op.drop_table('media_files')
