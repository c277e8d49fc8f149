"""Which model version a job uses (the one promoted with `ribbit model promote` in the
model line of the job's repository, bot/model_lines.py), and whether it is there to use
(:func:`preflight`, before any job starts its agent).

The registry's tables are mapped in the bot's store (bot/store/training.py, next to their
migration), so the worker reads them there and the imports stay one way (trainer ->
worker -> bot). Each job asks,
so a promotion or a rollback takes effect on the next job, with no restart: the policy
cache is keyed by these settings, and loads the new weights once per process.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import requests
from sqlalchemy.exc import SQLAlchemyError

from bot.forges.base import RepoRef
from bot.model_lines import DEFAULT_LINE, repo_line
from bot.store.db import Database
from bot.store.training import TrainingStore
from worker.settings import ModelSettings, WorkerSettings
from worker.weights import WeightsError, find_weights, pull_command, weights_path

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PromotedVersion:
    name: str
    base_model: str
    adapter_path: Path | None


def promoted_version(db: Database, line: str | None = DEFAULT_LINE) -> PromotedVersion | None:
    """``line``'s promoted version; None (the base model) for a repository in no line."""
    if line is None:
        return None
    try:
        found = TrainingStore(db).promoted(line)
    except SQLAlchemyError:
        log.warning("model registry unreadable; using the configured model", exc_info=True)
        return None
    if found is None:
        return None
    adapter = Path(found.adapter_path) if found.adapter_path else None
    return PromotedVersion(found.name, found.base_model, adapter)


def model_for_jobs(
    db: Database, configured: ModelSettings, line: str | None = DEFAULT_LINE
) -> ModelSettings:
    """``configured`` with ``line``'s promoted version applied: in process, its base weights
    and adapter; on a server, the name the server knows the version's adapter by (version
    names are unique and each version is in one line, so each line's jobs ask for their
    own adapter)."""
    version = promoted_version(db, line)
    if version is None or configured.policy == "replay":
        return configured
    log.info("using promoted model version %s (line %s)", version.name, line)
    return with_version(configured, version)


def with_version(configured: ModelSettings, version: PromotedVersion) -> ModelSettings:
    """``configured`` running ``version`` (how a job runs its line's promoted one; how
    `ribbit eval --version` runs a named one)."""
    if configured.policy == "replay":
        return configured
    if configured.policy == "openai":
        if version.adapter_path is None or configured.openai_server == "other":
            return configured
        return configured.model_copy(
            update={
                "model": served_name(configured, version.name),
                "adapter_path": version.adapter_path,
            }
        )
    return configured.model_copy(
        update={"model": version.base_model, "adapter_path": version.adapter_path}
    )


# -- inference servers ------------------------------------------------------------------------


def served_name(configured: ModelSettings, version: str) -> str:
    """How requests name a loaded adapter: vLLM by the adapter's own name, SGLang as
    ``<base>:<adapter>`` (version names never contain a colon)."""
    return f"{configured.model}:{version}" if configured.openai_server == "sglang" else version


def adapter_name(model: ModelSettings) -> str:
    return model.model.rsplit(":", 1)[-1]


class AdapterError(Exception):
    """An inference server refused or could not be asked to load/unload an adapter."""


class ServerUnreachable(AdapterError):
    """No answer at all (down, restarting): not the adapter's fault."""


class InferenceServer:
    """The runtime LoRA API of one vLLM (``/v1/load_lora_adapter``, needs
    ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``) or SGLang (``/load_lora_adapter``) server.
    Adapters loaded this way live until the server restarts; loading is idempotent, so
    workers re-load the promoted one before each job and a restart heals itself."""

    def __init__(self, base_url: str, model: ModelSettings, *, timeout_s: float = 60.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout_s = timeout_s

    def _url(self, verb: str) -> str:
        if self.model.openai_server == "sglang":
            return self.base_url.removesuffix("/v1") + f"/{verb}"
        return f"{self.base_url}/{verb}"

    def _post(self, verb: str, body: dict[str, str]) -> requests.Response:
        key = self.model.openai_api_key
        headers = {"Authorization": f"Bearer {key.get_secret_value()}"} if key else {}
        try:
            return requests.post(
                self._url(verb), json=body, headers=headers, timeout=self.timeout_s
            )
        except requests.RequestException as exc:
            reason = type(exc).__name__
            raise ServerUnreachable(f"cannot reach {self.base_url} ({reason})") from None

    def load(self, name: str, path: Path) -> None:
        resp = self._post("load_lora_adapter", {"lora_name": name, "lora_path": str(path)})
        if resp.ok or (resp.status_code == 400 and "already" in resp.text.lower()):
            return
        raise AdapterError(
            f"{self.base_url} refused to load {name} from {path}: HTTP {resp.status_code}: "
            f"{resp.text[:300]}"
        )

    def unload(self, name: str) -> None:
        resp = self._post("unload_lora_adapter", {"lora_name": name})
        if not resp.ok and resp.status_code != 404:
            raise AdapterError(f"{self.base_url} refused to unload {name}: {resp.text[:300]}")


def adapter_servers(model: ModelSettings) -> list[InferenceServer]:
    urls = model.adapter_servers or [model.openai_base_url]
    return [InferenceServer(url, model) for url in urls]


def publish_version(model: ModelSettings, name: str, adapter: Path) -> list[str]:
    """Load ``name`` on every server replica (before workers are told to ask for it)."""
    if model.policy != "openai" or model.openai_server == "other":
        return []
    servers = adapter_servers(model)
    for server in servers:
        server.load(name, adapter)
    return [s.base_url for s in servers]


def withdraw_version(model: ModelSettings, name: str) -> None:
    """Unload a rolled-back version, best effort: a server that is down has lost it."""
    if model.policy != "openai" or model.openai_server == "other":
        return
    for server in adapter_servers(model):
        try:
            server.unload(name)
        except AdapterError as exc:
            log.warning("%s", exc)


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


def preflight(db: Database, settings: WorkerSettings, repo: RepoRef | None = None) -> ModelSettings:
    """The model a job for ``repo`` runs (its line's promoted version, else the configured
    one; ``repo`` None: the default line), checked to be there, or :class:`ModelNotReady`
    before anything expensive starts (unchecked, a worker without weights would spend a
    minute in hub retries, then post an exception name)."""
    line = DEFAULT_LINE if repo is None else repo_line(db, settings.training, repo)
    return ready(model_for_jobs(db, settings.model, line), settings)


def ready(model: ModelSettings, settings: WorkerSettings) -> ModelSettings:
    """``model`` checked to be there to run (:func:`preflight`'s checks)."""
    if model.policy == "replay":
        if model.replay_file is None or not model.replay_file.is_file():
            raise ModelNotReady(
                "The replay policy has no trajectory file.",
                "set RIBBIT_MODEL__REPLAY_FILE to an existing file",
            )
        return model
    if model.policy == "openai":
        # The served policy finds its tokenizer under the weights folder (`ribbit model
        # pull` puts it there); unset, that folder is DATA_DIR/models, which only the
        # worker's settings know.
        where = {"weights_dir": settings.effective_weights_dir}
        return served_model(model if model.weights_dir else model.model_copy(update=where))
    return local_weights(model, settings.effective_weights_dir)


def served_model(model: ModelSettings) -> ModelSettings:
    """Make sure the worker's server has the promoted adapter (a restarted server has lost
    the ones loaded at run time). An unreachable server is left to the policy's retries."""
    if model.adapter_path is None:
        return model
    name = adapter_name(model)
    try:
        InferenceServer(model.openai_base_url, model).load(name, model.adapter_path)
    except ServerUnreachable as exc:
        log.warning("%s", exc)
        return model
    except AdapterError as exc:
        log.warning("%s", exc)
        raise ModelNotReady(
            f"The inference server cannot load the promoted model version `{name}`.",
            "make the version's adapter folder readable by the server (or set "
            "RIBBIT_MODEL__OPENAI_SERVER=other for a server without LoRA), or run "
            "`ribbit model rollback`",
        ) from None
    return model


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
