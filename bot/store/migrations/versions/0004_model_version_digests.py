"""model versions record which base weights and adapter they are (SHA-256 digests)

Revision ID: 0004
Revises: 0003
"""
import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('model_versions') as batch:
        batch.add_column(sa.Column('base_digest', sa.String(length=64), nullable=True))
        batch.add_column(sa.Column('adapter_digest', sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('model_versions') as batch:
        batch.drop_column('adapter_digest')
        batch.drop_column('base_digest')
