"""Which model version workers use (the one promoted with `ribbit model promote`), and
whether it is there to use (:func:`preflight`, before any job starts its agent).

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

from bot.settings import ModelSettings, Settings
from bot.store.db import Database
from worker.weights import WeightsError, find_weights, pull_command, weights_path

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


class ModelNotReady(Exception):
    """The model a job needs is not available. ``problem`` and ``fix`` are safe to post on
    an issue (no paths, no exception names); ``fix`` is what an admin runs or sets."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(f"{problem} An admin needs to {fix}.")
        self.problem, self.fix = problem, fix

    def for_issue(self) -> str:
        return (
            f"{self.problem} The agent was not started. An admin needs to {self.fix} "
            '(deploy/README.md, "Model weights"); then comment `/ribbit retry` here.'
        )


def preflight(model: ModelSettings, settings: Settings) -> ModelSettings:
    """``model`` as the policy should load it, or :class:`ModelNotReady` before anything
    expensive starts (a worker without weights used to spend a minute in hub retries and
    then fail with an exception name on the issue)."""
    if model.policy == "replay":
        if model.replay_file is None or not model.replay_file.is_file():
            raise ModelNotReady(
                "The replay policy has no trajectory file.",
                "set RIBBIT_MODEL__REPLAY_FILE to an existing file",
            )
        return model
    if model.policy == "openai":
        return model
    return local_weights(model, settings.effective_weights_dir)


def local_weights(model: ModelSettings, root: Path) -> ModelSettings:
    """Point ``model`` at weights on this host: a folder it names, what `ribbit model pull`
    put under ``root``, or (a developer's machine) the Hugging Face cache."""
    named = Path(model.model)
    if named.is_absolute() or named.is_dir():
        if not (named / "config.json").is_file():
            raise ModelNotReady(
                "The model folder this worker is configured with holds no weights.",
                "point RIBBIT_MODEL__MODEL at a folder with the weights, or set it to the "
                "model id and run `ribbit model pull`",
            )
        return model
    try:
        folder = weights_path(root, model.model)
    except WeightsError as exc:
        raise ModelNotReady(f"RIBBIT_MODEL__MODEL is not usable: {exc}.", "fix it") from None
    try:
        manifest = find_weights(folder)
    except WeightsError as exc:
        if _in_hub_cache(model):
            return model
        log.warning("no weights for %s: %s", model.model, exc)
        raise ModelNotReady(
            f"The model weights (`{model.model}`) are not installed on this worker.",
            f"run `{pull_command(model.model)}`",
        ) from None
    if model.revision and manifest.revision and model.revision != manifest.revision:
        log.warning(
            "pulled %s is revision %s; RIBBIT_MODEL__REVISION asks for %s",
            model.model,
            manifest.revision,
            model.revision,
        )
    return model.model_copy(update={"model": str(folder), "revision": None})


def _in_hub_cache(model: ModelSettings) -> bool:
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(model.model, "config.json", revision=model.revision)
    return isinstance(found, str)
