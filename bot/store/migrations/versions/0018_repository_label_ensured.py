"""repositories remember that Ribbit made sure its trigger label exists there (issue #36:
the label is created on first contact), so one job asks the forge, once per repository.
Repositories seen before start unchecked: their next job checks.

Revision ID: 0018
Revises: 0017
"""
import sqlalchemy as sa
from alembic import op

revision = '0018'
down_revision = '0017'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('repositories') as batch:
        batch.add_column(
            sa.Column('label_ensured', sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table('repositories') as batch:
        batch.drop_column('label_ensured')
