"""model lines: each model version belongs to one line; repositories record whether they
are private (unknown: treated as private)

Revision ID: 0009
Revises: 0008
"""
import sqlalchemy as sa
from alembic import op

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('model_versions') as batch:
        batch.add_column(
            sa.Column('line', sa.String(length=64), nullable=False, server_default='default')
        )
    op.create_index('ix_model_versions_line_state', 'model_versions', ['line', 'state'])
    with op.batch_alter_table('repositories') as batch:
        batch.add_column(sa.Column('private', sa.Boolean(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('repositories') as batch:
        batch.drop_column('private')
    op.drop_index('ix_model_versions_line_state', table_name='model_versions')
    with op.batch_alter_table('model_versions') as batch:
        batch.drop_column('line')
