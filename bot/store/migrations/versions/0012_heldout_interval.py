"""held-out pass@1 with its interval: a model version records the 95% confidence
interval of its held-out score and the rollouts per environment it came from

Revision ID: 0012
Revises: 0011
"""
import sqlalchemy as sa
from alembic import op

revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('model_versions') as batch:
        batch.add_column(sa.Column('heldout_ci_low', sa.Float(), nullable=True))
        batch.add_column(sa.Column('heldout_ci_high', sa.Float(), nullable=True))
        batch.add_column(sa.Column('heldout_k', sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('model_versions') as batch:
        batch.drop_column('heldout_k')
        batch.drop_column('heldout_ci_high')
        batch.drop_column('heldout_ci_low')
