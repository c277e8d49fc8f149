"""training runs keep their per-step mean reward (the dashboard's reward curves)

Revision ID: 0003
Revises: 0002
"""
import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('training_runs') as batch:
        batch.add_column(sa.Column('reward_curve', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('training_runs') as batch:
        batch.drop_column('reward_curve')
