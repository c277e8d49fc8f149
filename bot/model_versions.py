"""What the web side asks of the model registry: a seam passed in, since the registry
itself lives in trainer/ (trainer.registry.RegistryVersions), which a web-only install
may not have. The CLI wires the real one into ``create_app`` and ``ribbit notify``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from bot.settings import Settings
    from bot.store.db import Database


class ModelVersionError(Exception):
    """A promotion or rollback was refused; the message says why."""


@dataclass(frozen=True)
class ServedVersion:
    name: str
    promoted_at: datetime | None


class ModelVersions(Protocol):
    def promote(self, name: str, *, force: bool = False) -> list[str]:
        """Make ``name`` the version its line's jobs use, after loading its adapter on every
        inference server (returned); raises ModelVersionError when refused."""
        ...

    def rollback(self, line: str = "default") -> str | None:
        """Put back ``line``'s version promoted before; the name now served (None: the
        base). Lines: bot/model_lines.py."""
        ...

    def serving(self, line: str = "default") -> ServedVersion | None:
        """``line``'s promoted version (None: the configured base model)."""
        ...


ModelVersionsFactory = Callable[["Database", "Settings"], ModelVersions]
