"""Which model version workers use: the one promoted with `ribbit model promote`.

The registry lives in the store (tables from trainer's migration); reading it here
with plain SQL keeps the imports one way (trainer -> worker -> bot). Each job asks,
so a promotion or a rollback takes effect on the next job, with no restart: the policy
cache is keyed by these settings, and loads the new weights once per process.
"""

from __future__ import annotations

import logging
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from bot.settings import ModelSettings
from bot.store.db import Database

log = logging.getLogger(__name__)

_PROMOTED = text(
    "SELECT name, base_model, adapter_path FROM model_versions WHERE state = 'promoted' "
    "ORDER BY promoted_at DESC LIMIT 1"
)


def model_for_jobs(db: Database, configured: ModelSettings) -> ModelSettings:
    """``configured`` with the promoted version's weights, when one is promoted (and the
    deployment runs the model in process; a served model is the server's business)."""
    if configured.policy != "transformers":
        return configured
    try:
        with db.engine.connect() as conn:
            row = conn.execute(_PROMOTED).first()
    except SQLAlchemyError:
        log.warning("model registry unreadable; using %s", configured.model, exc_info=True)
        return configured
    if row is None:
        return configured
    name, base_model, adapter = row
    log.info("using promoted model version %s", name)
    return configured.model_copy(
        update={"model": base_model, "adapter_path": Path(adapter) if adapter else None}
    )
