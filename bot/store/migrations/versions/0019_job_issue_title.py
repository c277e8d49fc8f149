"""jobs keep the issue's title from the webhook that admitted them (issue #36), so a job
that fails before the worker reads the issue (set-up, clone, a refusal) still names it
on the reviewer and admin pages. Jobs admitted before have none: NULL, shown by number.

Revision ID: 0019
Revises: 0018
"""
import sqlalchemy as sa
from alembic import op

revision = '0019'
down_revision = '0018'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.add_column(sa.Column('issue_title', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.drop_column('issue_title')
