"""Ribbit's one typed settings object.

Values come, highest priority first, from keyword overrides, environment
variables prefixed ``RIBBIT_`` (``__`` nests: ``RIBBIT_SANDBOX__BACKEND=docker``),
an optional config file (YAML or TOML) named by ``RIBBIT_CONFIG_FILE``, and the
defaults below. Every default is documented in the README's settings table,
which ``tests/unit/bot/test_settings.py`` keeps in step with this file.

The sections only the worker and the trainer read (sandbox, model, agent, gates)
live in worker/settings.py: ``WorkerSettings`` is this class plus them, and is what
every `ribbit` process builds (bot/cli.py, the composition root). The web tier types
against ``Settings`` and so never sees them. Which variables are settings (the
typo warning, the config file's keys, the README table) is asked of the class being
built, so a worker's variables are known wherever they are read.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    NestedSecretsSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from bot.secret_strength import require_strong_secret


class SettingsError(ValueError):
    """Settings that cannot work; the message says which variable to change."""


def _default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "ribbit"


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _blank_is_unset(value: Any) -> Any:
    """An empty secret (``RIBBIT_GITHUB__WEBHOOK_SECRET=``, a Compose ``${VAR}`` left
    unset) means "not set": as a key it would sign forged webhooks anyone can make."""
    if isinstance(value, str) and not value.strip():
        return None
    if isinstance(value, SecretStr) and not value.get_secret_value().strip():
        return None
    return value


# The actor RIBBIT_ADMIN_TOKEN's holder is in the audit log; named admins are others.
SHARED_ADMIN = "admin"
ADMIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")


class GitHubSettings(Section):
    webhook_secret: SecretStr | None = Field(
        default=None,
        description="Secret GitHub signs webhooks with (X-Hub-Signature-256). Unset: the GitHub "
        "endpoint answers 503 and says so at start-up; it is never left open.",
    )
    api_url: str = Field(
        default="https://api.github.com",
        description="REST API base; set it for GitHub Enterprise Server (https://HOST/api/v3).",
    )
    token: SecretStr | None = Field(
        default=None, description="Personal access token (the simple option instead of an App)."
    )
    app_id: int | None = Field(default=None, description="GitHub App id (with private_key_file).")
    private_key_file: Path | None = Field(
        default=None, description="PEM file of the GitHub App's private key."
    )
    bot_login: str = Field(
        default="ribbit[bot]",
        description="The bot's own login; events it caused are ignored so it never answers itself.",
    )
    write_interval_s: float = Field(
        default=1.0,
        ge=0,
        description="Pause between write calls, as GitHub advises against secondary rate limits.",
    )
    retry_backoff_s: float = Field(
        default=0.5,
        ge=0,
        description="Backoff factor for retrying 5xx and connection errors (with jitter).",
    )
    http_timeout_s: int = Field(
        default=30, ge=1, description="Seconds to wait for one API answer before retrying."
    )

    _blank_secrets = field_validator("webhook_secret", "token", mode="before")(_blank_is_unset)

    @field_validator("webhook_secret")
    @classmethod
    def _strong_webhook_secret(cls, value: SecretStr | None) -> SecretStr | None:
        return require_strong_secret(value, "RIBBIT_GITHUB__WEBHOOK_SECRET")


class GitLabSettings(Section):
    webhook_token: SecretStr | None = Field(
        default=None,
        description="Secret token GitLab sends in X-Gitlab-Token. Unset: the GitLab endpoint "
        "answers 503 and says so at start-up; it is never left open.",
    )
    url: str = Field(default="https://gitlab.com", description="GitLab base URL (self-managed).")
    token: SecretStr | None = Field(
        default=None, description="Project/group access token or bot user's token."
    )
    bot_username: str = Field(default="ribbit-bot", description="The bot user's username.")

    _blank_secrets = field_validator("webhook_token", "token", mode="before")(_blank_is_unset)

    @field_validator("webhook_token")
    @classmethod
    def _strong_webhook_token(cls, value: SecretStr | None) -> SecretStr | None:
        return require_strong_secret(value, "RIBBIT_GITLAB__WEBHOOK_TOKEN")

    retry_backoff_s: float = Field(
        default=0.5,
        ge=0,
        description="Backoff factor for retrying 5xx and connection errors (with jitter).",
    )
    http_timeout_s: int = Field(
        default=30, ge=1, description="Seconds to wait for one API answer before retrying."
    )


class AdmissionSettings(Section):
    max_concurrent_jobs: int = Field(
        default=4, ge=1, description="Jobs running at once, all repositories together."
    )
    max_concurrent_jobs_per_repo: int = Field(
        default=1, ge=1, description="Jobs running at once in one repository."
    )
    daily_jobs_per_repo: int = Field(
        default=50, ge=0, description="Jobs one repository may start per UTC day (0: none)."
    )
    allowed_repos: list[str] = Field(
        default_factory=list,
        description="Repositories (forge:owner/name or owner/name) the bot works on. Empty: every "
        "repository whose webhooks reach it with a valid secret.",
    )


class NotifySettings(Section):
    webhook_url: SecretStr | None = Field(
        default=None,
        description='Slack-compatible incoming webhook ({"text": ...} is POSTed). Unset: no '
        "notifications.",
    )
    failure_threshold: int = Field(
        default=5, ge=1, description="Failed jobs in one repository, within the window, to notify."
    )
    failure_window_minutes: int = Field(
        default=60, ge=1, description="Window for failure_threshold, in minutes."
    )
    worker_silence_minutes: int = Field(
        default=15,
        ge=1,
        description="A running job without a heartbeat for this long means its worker is down.",
    )
    check_interval_s: float = Field(
        default=30.0,
        ge=0,
        description="How often `ribbit serve` checks every condition itself (a worker killed "
        "with no cron left to notice). 0: only `ribbit notify` checks.",
    )
    worker_heartbeat_s: float = Field(
        default=15.0, gt=0, description="How often each worker records that it is alive."
    )
    worker_down_after_s: float = Field(
        default=90.0,
        gt=0,
        description="A worker silent this long is down (notified once per incident, and once "
        "more when it is back); several heartbeats, so one slow write is no incident.",
    )


class MetricsSettings(Section):
    worker_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="Port each worker serves Prometheus /metrics on (from its main process, "
        "summing its pool's samples). Unset: workers export no metrics.",
    )
    worker_host: str = Field(
        default="127.0.0.1",
        description="Address the worker's /metrics listens on (0.0.0.0 in a container).",
    )


class NoiseSettings(Section):
    min_merge_rate: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="A repository whose bot PRs are merged less often than this (over the "
        "window) is paused and its maintainers told why. 0: never pause.",
    )
    window_days: int = Field(
        default=30, ge=1, description="How far back merge outcomes count, in days."
    )
    min_outcomes: int = Field(
        default=10,
        ge=1,
        description="Merged or closed bot PRs needed in the window before a repository can "
        "be paused (a rate over a handful says nothing).",
    )


class ReviewerSettings(Section):
    link_secret: SecretStr | None = Field(
        default=None,
        description="Key that signs each job's reviewer link (HMAC). Unset: no reviewer page "
        "(404) and no link in comments or PR bodies.",
    )
    public_url: str | None = Field(
        default=None,
        description="Base URL reviewers reach the web app at (https://ribbit.example.com), for "
        "the links the worker posts. Unset: no link is posted.",
    )
    link_ttl_days: int = Field(
        default=30, ge=1, le=366, description="Days a reviewer link stays valid."
    )
    status_edit_interval_s: float = Field(
        default=30.0,
        ge=0,
        description="Least time between two progress edits of the status comment (phase "
        "changes are always shown).",
    )
    poll_interval_s: float = Field(
        default=3.0, gt=0, le=300, description="How often the reviewer page asks for progress."
    )

    @field_validator("link_secret")
    @classmethod
    def _strong_link_secret(cls, value: SecretStr | None) -> SecretStr | None:
        # Anyone can try signatures offline against a posted link: a weak key falls.
        return require_strong_secret(value, "RIBBIT_REVIEWER__LINK_SECRET")

    @field_validator("public_url")
    @classmethod
    def _public_url_is_http(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("https://", "http://")):
            raise ValueError("RIBBIT_REVIEWER__PUBLIC_URL must start with https:// or http://")
        if value is not None and any(c in value for c in " ()<>[]\n"):
            raise ValueError("RIBBIT_REVIEWER__PUBLIC_URL must be a plain URL")
        return value


class TrainingDataSettings(Section):
    """Whose outcomes may train which model line (bot/model_lines.py)."""

    lines: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Model lines: name -> repositories whose outcomes train it and whose jobs "
        "it serves, as `forge:owner/name`; globs (`github:acme/*`) match public repositories "
        "only, a private one must be named exactly. JSON in the variable.",
    )
    public_repos: Literal["default_line", "listed"] = Field(
        default="default_line",
        description="A public repository in no line: `default_line` trains and is served by "
        "the `default` line; `listed`: by none (base model). Private ones always need listing.",
    )
    retention_days: int | None = Field(
        default=None,
        ge=1,
        description="Outcomes, trajectories and environments older than this are deleted by "
        "`ribbit data prune`. Unset: kept.",
    )

    @field_validator("lines")
    @classmethod
    def _line_names(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        owner: dict[str, str] = {}
        for name, repos in value.items():
            if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$", name):
                raise ValueError(f"model line {name!r}: letters, digits, _ . - only")
            for entry in repos:
                forge, sep, repo = entry.partition(":")
                if not sep or not forge or "/" not in repo:
                    raise ValueError(f"model line {name!r}: {entry!r} is not forge:owner/name")
                # A job is served by one line: a repository named in two is ambiguous.
                folded = entry.casefold()
                if folded in owner and owner[folded] != name:
                    raise ValueError(
                        f"{entry} is named by model lines {owner[folded]!r} and {name!r}; "
                        "a repository belongs to one line"
                    )
                owner[folded] = name
        return value


class Settings(BaseSettings):
    """Everything Ribbit reads from its environment."""

    model_config = SettingsConfigDict(
        env_prefix="RIBBIT_",
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
        # Container secrets (compose `secrets:`, Kubernetes secret volumes): one file per
        # setting, named like its variable in lower case (ribbit_github__webhook_secret).
        secrets_dir="/run/secrets",
        secrets_dir_missing="ok",
        secrets_nested_delimiter="__",
    )

    data_dir: Path = Field(
        default_factory=_default_data_dir,
        description="Where the database, broker, clones and trajectories live.",
    )
    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL. Unset: sqlite:///DATA_DIR/ribbit.db. "
        "PostgreSQL: postgresql+psycopg://user:pass@host/db.",
    )
    database_auto_upgrade: bool | None = Field(
        default=None,
        description="Let each process bring the database schema to the newest revision when "
        "it starts (under the migration lock) instead of refusing to start until `ribbit db "
        "upgrade` has run. Unset: on for SQLite (the embedded default), off otherwise.",
    )
    broker_url: str | None = Field(
        default=None,
        description="Celery broker URL (redis://host:6379/0). Unset: an embedded broker in "
        "DATA_DIR/broker.db that needs no server.",
    )
    result_backend: str | None = Field(
        default=None,
        description="Celery result backend, used only by training rollouts (`ribbit train "
        "--rollouts celery`). Unset: the broker's Redis, or with the embedded broker "
        "`db+sqlite:///DATA_DIR/results.db`.",
    )
    label: str = Field(default="ribbit", description="Issue label that asks the bot for a fix.")
    command_prefix: str = Field(default="/ribbit", description="Comment prefix for commands.")
    max_body_bytes: int = Field(
        default=1024 * 1024, ge=1024, description="Largest webhook body accepted (413 above)."
    )
    host: str = Field(default="127.0.0.1", description="Address `ribbit serve` listens on.")
    port: int = Field(default=8080, ge=0, le=65535, description="Port `ribbit serve` listens on.")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(default="INFO")
    log_format: Literal["auto", "json", "text"] = Field(
        default="auto",
        description="Log line format. auto: text lines when stderr is a terminal (a person "
        "reading), one JSON object a line otherwise (a log collector).",
    )
    admin_token: SecretStr | None = Field(
        default=None,
        description="Bearer token for /admin, shared: its holder is `admin` in the audit log "
        "(RIBBIT_ADMIN_TOKENS names each admin). Unset, with no named admins: the dashboard "
        "is disabled.",
    )
    admin_tokens: dict[str, SecretStr] = Field(
        default_factory=dict,
        description="Named admins: name -> token, as JSON in the variable or one variable "
        "each (RIBBIT_ADMIN_TOKENS__ALICE); the audit log names who acted. Names: letters, "
        "digits, _ . @ -.",
    )
    admin_poll_interval_s: float = Field(
        default=5.0,
        gt=0,
        le=300,
        description="How often the dashboard's jobs list and health page ask for changes.",
    )
    job_time_limit_s: int | None = Field(
        default=None,
        ge=30,
        description="Hard Celery time limit of one job (soft: 60 s less). Unset: derived from "
        "the agent, setup and gate budgets, so a full-length episode is never cut.",
    )
    github: GitHubSettings = Field(default_factory=GitHubSettings)
    gitlab: GitLabSettings = Field(default_factory=GitLabSettings)
    admission: AdmissionSettings = Field(default_factory=AdmissionSettings)
    notify: NotifySettings = Field(default_factory=NotifySettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    noise: NoiseSettings = Field(default_factory=NoiseSettings)
    reviewer: ReviewerSettings = Field(default_factory=ReviewerSettings)
    training: TrainingDataSettings = Field(default_factory=TrainingDataSettings)

    _blank_admin_token = field_validator("admin_token", mode="before")(_blank_is_unset)

    @field_validator("admin_token")
    @classmethod
    def _strong_admin_token(cls, value: SecretStr | None) -> SecretStr | None:
        return require_strong_secret(value, "RIBBIT_ADMIN_TOKEN")

    @field_validator("admin_tokens")
    @classmethod
    def _named_admins(cls, value: dict[str, SecretStr]) -> dict[str, SecretStr]:
        for name, token in value.items():
            if not ADMIN_NAME.match(name):
                raise ValueError(f"admin name {name!r}: letters, digits, _ . @ - only")
            require_strong_secret(token, f"RIBBIT_ADMIN_TOKENS__{name.upper()}")
        return value

    @model_validator(mode="after")
    def _admins_distinct(self) -> Settings:
        # One token, one actor: a token shared by two names would make the audit log guess.
        named = dict(self.admin_tokens)
        if self.admin_token is not None:
            if SHARED_ADMIN in named:
                raise ValueError(
                    f"RIBBIT_ADMIN_TOKENS names {SHARED_ADMIN!r}, the actor of "
                    "RIBBIT_ADMIN_TOKEN; give that admin another name"
                )
            named[SHARED_ADMIN] = self.admin_token
        seen: dict[str, str] = {}
        for name, token in named.items():
            other = seen.setdefault(token.get_secret_value(), name)
            if other != name:
                raise ValueError(f"admins {other!r} and {name!r} have the same token")
        return self

    @field_validator("label")
    @classmethod
    def _label_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("RIBBIT_LABEL must not be empty")
        return value

    @model_validator(mode="after")
    def _app_key_pair(self) -> Settings:
        gh = self.github
        if (gh.app_id is None) != (gh.private_key_file is None):
            raise ValueError(
                "set both RIBBIT_GITHUB__APP_ID and RIBBIT_GITHUB__PRIVATE_KEY_FILE, or neither"
            )
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (
            init_settings,
            env_settings,
            _ConfigFileSource(settings_cls),
            NestedSecretsSettingsSource(file_secret_settings),
        )

    # Derived values: computed, never stored, so they cannot disagree with data_dir.
    @property
    def effective_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.data_dir / 'ribbit.db'}"

    @property
    def effective_database_auto_upgrade(self) -> bool:
        if self.database_auto_upgrade is not None:
            return self.database_auto_upgrade
        return self.effective_database_url.startswith("sqlite")

    @property
    def effective_broker_url(self) -> str:
        return self.broker_url or f"sqla+sqlite:///{self.data_dir / 'broker.db'}"

    @property
    def effective_result_backend(self) -> str:
        if self.result_backend:
            return self.result_backend
        if self.broker_url and self.broker_url.startswith(("redis://", "rediss://")):
            return self.broker_url
        return f"db+sqlite:///{self.data_dir / 'results.db'}"

    @property
    def effective_job_time_limit_s(self) -> int | None:
        """The hard time limit of one job, where this process knows it: the set limit, or
        (WorkerSettings) the one derived from the agent, setup and gate budgets. None in a
        process without the worker's sections, which runs no job."""
        return self.job_time_limit_s

    @property
    def configured_model(self) -> str | None:
        """The model jobs run on, for the dashboard; None without the worker's sections."""
        return None

    @property
    def uses_embedded_broker(self) -> bool:
        return self.broker_url is None

    def secret_values(self) -> list[str]:
        """Every secret's plain value, for log redaction and sandbox checks."""
        found: list[str] = []

        def walk(obj: Any) -> None:
            if isinstance(obj, SecretStr):
                value = obj.get_secret_value()
                if value:
                    found.append(value)
            elif isinstance(obj, BaseModel):
                for name in type(obj).model_fields:
                    walk(getattr(obj, name))
            elif isinstance(obj, dict):  # the named admins' tokens
                for item in obj.values():
                    walk(item)

        walk(self)
        return found


class _ConfigFileSource(PydanticBaseSettingsSource):
    """Reads RIBBIT_CONFIG_FILE (YAML or TOML); env vars still win over it."""

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        super().__init__(settings_cls)
        path = os.environ.get("RIBBIT_CONFIG_FILE")
        self._data: dict[str, Any] = load_config_file(Path(path), settings_cls) if path else {}

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return {k: v for k, v in self._data.items() if k in self.settings_cls.model_fields}


def load_config_file(
    path: Path, settings_class: type[BaseSettings] | None = None
) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise SettingsError(f"RIBBIT_CONFIG_FILE={path}: cannot read it ({exc.strerror})") from exc
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else yaml.safe_load(text)
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        kind = path.suffix[1:] or "YAML"
        raise SettingsError(f"RIBBIT_CONFIG_FILE={path}: not valid {kind}: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SettingsError(f"RIBBIT_CONFIG_FILE={path}: the top level must be a mapping")
    unknown = sorted(set(data) - set((settings_class or Settings).model_fields))
    if unknown:
        raise SettingsError(f"RIBBIT_CONFIG_FILE={path}: unknown settings {', '.join(unknown)}")
    return data


S = TypeVar("S", bound=Settings)


def load_settings(**overrides: Any) -> Settings:
    """Build Settings, turning pydantic's errors into one readable SettingsError."""
    return build_settings(Settings, **overrides)


def build_settings(settings_class: type[S], /, **overrides: Any) -> S:
    """Build ``settings_class`` (Settings or a subclass adding sections, such as
    worker.settings.WorkerSettings) as load_settings does; its fields decide which
    RIBBIT_* variables are known."""
    from pydantic import ValidationError

    # Imported here: settings_variables.py reads the Settings class this module defines.
    from bot.settings_variables import warn_unknown_variables

    warn_unknown_variables(os.environ, settings_class)
    try:
        return settings_class(**overrides)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = "__".join(str(p) for p in err["loc"]).upper()
            name = f"RIBBIT_{loc}" if loc else "settings"
            # A validator's ValueError reads "Value error, <what it said>": say just that,
            # and once only the variable it names itself.
            msg = err["msg"].removeprefix("Value error, ")
            lines.append(msg if msg.startswith(f"{name} ") else f"{name}: {msg}")
        raise SettingsError("invalid settings:\n  " + "\n  ".join(lines)) from None
