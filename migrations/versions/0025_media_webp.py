"""media: WebP copies of each width, named by the file

media_files.webp lists the variants that have a WebP copy (stored in media_variants as
"480.webp", ..., which needs a longer variant name). Files stored before have none ("")
and their pages offer the original's type alone, as before (`flask add-webp` makes
them). Neither change rewrites a table: a column with a constant default is added to the
catalogue only, and a longer varchar limit is a catalogue change too (its index kept).

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-13

"""
import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = '0025'
down_revision = '0024'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('media_files', schema=None) as batch_op:
        batch_op.add_column(sa.Column('webp', sa.String(length=40), nullable=False,
                                      server_default=''))
    with op.batch_alter_table('media_variants', schema=None) as batch_op:
        # squawk-ignore changing-column-type: widening a varchar only changes the catalogue, PostgreSQL rewrites no row and no index (file ids checked unchanged)
        batch_op.alter_column('variant', existing_type=sa.String(length=8),
                              type_=sa.String(length=16), existing_nullable=False)


def downgrade():
    op.execute("DELETE FROM media_variants WHERE variant LIKE '%.webp'")
    with op.batch_alter_table('media_variants', schema=None) as batch_op:
        batch_op.alter_column('variant', existing_type=sa.String(length=16),
                              type_=sa.String(length=8), existing_nullable=False)
    with op.batch_alter_table('media_files', schema=None) as batch_op:
        batch_op.drop_column('webp')
