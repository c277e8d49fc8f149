"""`ribbit doctor`: each part checked, with what to do when it fails."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from bot.settings import Settings, SettingsError, load_settings


@dataclass(frozen=True)
class Check:
    name: str
    status: Literal["ok", "warn", "fail"]
    detail: str


def _guard(name: str, fn: Callable[[], Check | list[Check]]) -> list[Check]:
    try:
        result = fn()
    except Exception as exc:
        return [Check(name, "fail", f"{type(exc).__name__}: {exc}")]
    return result if isinstance(result, list) else [result]


def run_checks(settings: Settings | None = None) -> list[Check]:
    if settings is None:
        try:
            settings = load_settings()
        except SettingsError as exc:
            return [Check("settings", "fail", str(exc))]
    s = settings
    checks = [Check("settings", "ok", f"data dir {s.data_dir}")]

    def database() -> Check:
        from bot.store.db import Database

        db = Database(s.effective_database_url)
        db.ping()
        db.migrate()
        return Check("database", "ok", db.engine.url.render_as_string(hide_password=True))

    def broker() -> Check:
        from bot.health import check_broker

        check_broker(s.effective_broker_url)
        kind = "embedded (SQLite)" if s.uses_embedded_broker else "Redis/URL"
        return Check("broker", "ok", kind)

    def forges() -> list[Check]:
        from bot.webhooks import MISSING_SECRET, configured_forges

        out = []
        for forge, ok in configured_forges(s).items():
            out.append(Check(f"{forge} webhooks", "ok" if ok else "warn",
                             "secret configured" if ok else MISSING_SECRET[forge]))
        return out

    def optional(module: str, attr: str) -> Callable[[], list[Check]]:
        def run() -> list[Check]:
            try:
                mod = importlib.import_module(module)
            except ModuleNotFoundError:
                return [Check(module, "warn", "not installed in this build")]
            found: list[Check] = getattr(mod, attr)(s)
            return found

        return run

    checks += _guard("database", database)
    checks += _guard("broker", broker)
    checks += _guard("forges", forges)
    checks += _guard("sandbox", optional("worker.sandbox.doctor", "doctor_checks"))
    checks += _guard("model", optional("worker.agent.doctor", "doctor_checks"))
    return checks
