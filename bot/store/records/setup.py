"""The set-up step's part of a job's record (``setup``): what the worker's
:class:`worker.sandbox.setup.SetupResult` did, as stored.

The worker makes the record (``SetupResult.to_record``); the admin pages and the data
retention read it back through :meth:`SetupRecord.from_json`. Keys are written in the
order the worker always wrote them, and keys this version does not know are kept in
``extra`` and written back after them, so a row reads back to the same JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.store.tolerant import opt_bool, opt_float, opt_int, opt_str, opt_str_list

_KEYS = (
    "command",
    "ok",
    "exit_code",
    "timed_out",
    "duration_s",
    "network",
    "blocked",
    "restored_from",
    "output_tail",
)


@dataclass(frozen=True)
class SetupRecord:
    """The setup step as the job's record keeps it."""

    command: str | None  # the repository's setup command (None: only the environment)
    ok: bool
    exit_code: int | None  # None when the command did not run
    timed_out: bool
    duration_s: float
    network: bool  # the command could reach the allow-listed registries
    blocked: tuple[str, ...]  # the requests the setup network refused, described
    restored_from: str | None  # "cache" or "snapshot" when setup did not run here
    output_tail: str
    extra: dict[str, Any] = field(default_factory=dict)  # keys of a newer version, kept

    def to_json(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "ok": self.ok,
            "exit_code": self.exit_code,
            "timed_out": self.timed_out,
            "duration_s": self.duration_s,
            "network": self.network,
            "blocked": list(self.blocked),
            "restored_from": self.restored_from,
            "output_tail": self.output_tail,
            **self.extra,
        }

    @classmethod
    def from_json(cls, data: Any) -> SetupRecord | None:
        """None when ``data`` is not a setup record this code can read whole (a key
        missing or of the wrong type): the caller keeps such a value as it was stored."""
        if not isinstance(data, dict) or not all(k in data for k in _KEYS):
            return None
        ok, timed_out, network = (opt_bool(data[k]) for k in ("ok", "timed_out", "network"))
        duration_s, output_tail = opt_float(data["duration_s"]), opt_str(data["output_tail"])
        blocked = opt_str_list(data["blocked"])
        command, exit_code = data["command"], data["exit_code"]
        restored_from = data["restored_from"]
        if (
            ok is None
            or timed_out is None
            or network is None
            or duration_s is None
            or output_tail is None
            or blocked is None
            or (command is not None and opt_str(command) is None)
            or (exit_code is not None and opt_int(exit_code) is None)
            or (restored_from is not None and opt_str(restored_from) is None)
        ):
            return None
        return cls(
            command=command,
            ok=ok,
            exit_code=exit_code,
            timed_out=timed_out,
            duration_s=duration_s,
            network=network,
            blocked=blocked,
            restored_from=restored_from,
            output_tail=output_tail,
            extra={k: v for k, v in data.items() if k not in _KEYS},
        )
