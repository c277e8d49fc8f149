"""jobs keep the structured reason they failed (issue #35: what failed, the tail of its
output, the refused hosts, who can fix it), beside the one-line failure_reason. Jobs
that failed before have none: NULL, shown as their one line.

Revision ID: 0017
Revises: 0016
"""
import sqlalchemy as sa
from alembic import op

revision = '0017'
down_revision = '0016'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.add_column(sa.Column('failure_detail', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.drop_column('failure_detail')
