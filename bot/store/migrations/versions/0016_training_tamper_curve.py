"""training runs keep their per-step tamper rate (issue #31: the reward-hacking signal,
beside the reward curve). Old runs have none: NULL, read as "not recorded".

Revision ID: 0016
Revises: 0015
"""
import sqlalchemy as sa
from alembic import op

revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('training_runs') as batch:
        batch.add_column(sa.Column('tamper_curve', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('training_runs') as batch:
        batch.drop_column('tamper_curve')
