"""Which RIBBIT_* variables are settings, asked of the settings class being built
(Settings, or worker.settings.WorkerSettings with the worker's sections): the README's
settings table, and the warning for a variable no setting reads (a typo pydantic would
ignore silently).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from bot.settings import Settings


def settings_table(settings_class: type[Settings] = Settings) -> str:
    """The README's settings table, generated from the fields of ``settings_class`` (the
    README shows worker.settings.WorkerSettings's; a test keeps it in step)."""
    rows = ["| Variable | Default | Meaning |", "|---|---|---|"]

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, field in model.model_fields.items():
            env = f"{prefix}{name.upper()}"
            ann = field.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                walk(ann, env + "__")
                continue
            if name == "data_dir":
                default: Any = "$XDG_DATA_HOME/ribbit (~/.local/share/ribbit)"
            elif field.default_factory is not None:
                default = field.default_factory()  # type: ignore[call-arg]
            else:
                default = field.default
            shown = "unset" if default is None else default
            desc = (field.description or "").replace("|", "\\|")
            rows.append(f"| `{env}` | `{shown}` | {desc} |")

    walk(settings_class, "RIBBIT_")
    return "\n".join(rows)


# RIBBIT_* variables that are not settings: read by the build, deploy and test scripts.
NOT_SETTINGS = frozenset(
    {
        "RIBBIT_CONFIG_FILE",
        # Read by the `ribbit` command itself (bot/cli_errors.py): tracebacks on failure.
        "RIBBIT_DEBUG",
        # Set by `ribbit serve` for its embedded worker and beat (bot/supervisor.py).
        "RIBBIT_EMBEDDED_PARENT",
        # Set by the image build (deploy/Dockerfile): the commit in ribbit_build_info.
        "RIBBIT_BUILD_COMMIT",
        "RIBBIT_JUNIT",
        "RIBBIT_TORCH_VARIANT",
        "RIBBIT_SANDBOX_SOCKET",
        "RIBBIT_GPU_IMAGE",
        "RIBBIT_SANDBOX_IMAGE",
        "RIBBIT_DEBIAN_SUITE",
        "RIBBIT_DEBIAN_MIRROR",
        "RIBBIT_WORKER_CONCURRENCY",
        "RIBBIT_PUBLISH",
        "RIBBIT_IMAGE",
        "RIBBIT_TEST_REDIS_URL",
        "RIBBIT_TEST_POSTGRES_URL",
    }
)


def setting_variables(
    settings_class: type[Settings] = Settings,
) -> tuple[frozenset[str], frozenset[str]]:
    """(every variable naming a setting, prefixes under which any name is accepted:
    settings of dict or list type take nested keys)."""
    names: set[str] = set()
    open_prefixes: set[str] = set()

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, field in model.model_fields.items():
            env = f"{prefix}{name.upper()}"
            ann = field.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                names.add(env)  # the whole section as JSON
                walk(ann, env + "__")
                continue
            names.add(env)
            open_prefixes.add(env + "__")

    walk(settings_class, "RIBBIT_")
    return frozenset(names), frozenset(open_prefixes)


def unknown_variables(
    environ: Mapping[str, str], settings_class: type[Settings] = Settings
) -> list[tuple[str, str | None]]:
    """RIBBIT_* variables no setting of ``settings_class`` reads, each with the closest
    valid name (or None)."""
    import difflib

    names, open_prefixes = setting_variables(settings_class)
    unknown = []
    for key in sorted(environ):
        if not key.startswith("RIBBIT_") or key in names or key in NOT_SETTINGS:
            continue
        if any(key.startswith(p) for p in open_prefixes):
            continue
        close = difflib.get_close_matches(key, sorted(names), n=1, cutoff=0.75)
        unknown.append((key, close[0] if close else None))
    return unknown


def warn_unknown_variables(
    environ: Mapping[str, str], settings_class: type[Settings] = Settings
) -> list[str]:
    """Log a warning for each mistyped RIBBIT_* variable (pydantic ignores them silently,
    so a misspelt secret would leave a forge unconfigured without a word)."""
    import logging

    messages = []
    for key, close in unknown_variables(environ, settings_class):
        hint = f"; did you mean {close}?" if close else ""
        messages.append(f"{key} is not a Ribbit setting and is ignored{hint}")
    for message in messages:
        logging.getLogger("bot.settings").warning(message)
    return messages
