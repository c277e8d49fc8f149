"""`ribbit doctor`: each part checked, with what to do when it fails.

The worker-side parts (sandbox, model) are imported only when checked, so bot/ keeps no
import-time dependency on worker/."""

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
            out.append(
                Check(
                    f"{forge} webhooks",
                    "ok" if ok else "warn",
                    "secret configured" if ok else MISSING_SECRET[forge],
                )
            )
        return out

    def sandbox() -> list[Check]:
        sandbox_mod = importlib.import_module("worker.sandbox")
        found = sandbox_mod.check_backends(s.sandbox)
        out = [Check(f"sandbox {c.name}", "ok" if c.ok else "warn", c.detail) for c in found]
        if not any(c.ok for c in found):
            out.append(
                Check(
                    "sandbox",
                    "fail",
                    "no sandbox backend works: install podman and "
                    "build the image (deploy/sandbox/build-image.sh), or bubblewrap",
                )
            )
        else:
            chosen = sandbox_mod.resolve_backend(s.sandbox)
            out.append(Check("sandbox", "ok", f"jobs will use {chosen}"))
        return out

    def model() -> Check:
        m = s.model
        if m.policy == "replay":
            ok = m.replay_file is not None and m.replay_file.exists()
            return Check("model", "ok" if ok else "fail", f"replay {m.replay_file}")
        if m.policy == "openai":
            import requests

            resp = requests.get(m.openai_base_url.rstrip("/") + "/models", timeout=5)
            return Check(
                "model",
                "ok" if resp.ok else "fail",
                f"{m.openai_base_url} answered {resp.status_code}",
            )
        models = importlib.import_module("worker.models")
        try:
            ready = models.local_weights(m, s.effective_weights_dir)
        except models.ModelNotReady as exc:
            return Check("model", "fail", f"{exc.problem} Run: {exc.fix.removeprefix('run ')}")
        return Check("model", "ok", f"{m.model}: weights at {ready.model}")

    checks += _guard("database", database)
    checks += _guard("broker", broker)
    checks += _guard("forges", forges)
    checks += _guard("sandbox", sandbox)
    checks += _guard("model", model)
    return checks
