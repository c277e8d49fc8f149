"""What every gate takes and returns.

A gate judges a candidate patch against the repository at its base commit and
returns a typed :class:`GateResult`. All gates run for every patch (a failing
gate does not hide the others' findings), and the trainer reuses the same
results as its reward, so results are plain data that serialise to JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from bot.repo_config import RepoConfig
from bot.settings import GateSettings
from worker.sandbox.base import Sandbox, SandboxFactory

if TYPE_CHECKING:
    from worker.sandbox.setup import SetupResult

Severity = Literal["info", "warning", "error"]


@dataclass(frozen=True)
class Finding:
    gate: str
    rule: str
    message: str
    path: str | None = None
    line: int | None = None
    severity: Severity = "error"


@dataclass(frozen=True)
class GateResult:
    name: str
    passed: bool
    findings: tuple[Finding, ...] = ()
    logs: str = ""
    duration_s: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)  # gate-specific, JSON-safe

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class GateContext:
    """The repository at its base commit (a host checkout, never executed on the host),
    the candidate patch, and what the gates may use to run things."""

    repo_dir: Path
    base_commit: str
    patch: str
    repo_config: RepoConfig
    gate_settings: GateSettings
    sandbox_factory: SandboxFactory
    issue_text: str = ""  # title + body, to find tests the issue names
    # Makes each fresh test sandbox ready (worker/sandbox/setup.py run_setup, bound to the
    # repo's config and the sandbox settings); None: only the repo's setup command runs.
    setup_step: Callable[[Sandbox], SetupResult] | None = None


@runtime_checkable
class Gate(Protocol):
    name: str

    def run(self, ctx: GateContext) -> GateResult: ...


GateFactory = Callable[[], Gate]
