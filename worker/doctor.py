"""`ribbit doctor`'s worker-side checks: the sandbox backends, the model and Semgrep. Registered in
pyproject's ribbit.doctor entry points; bot.doctor runs them after its own, handing each the
Settings it loaded (typed as bot's; the worker's sections through as_worker_settings)."""

from __future__ import annotations

import sys
from pathlib import Path

from bot.doctor_check import Check
from bot.settings import Settings
from worker.settings import as_worker_settings


def sandbox_checks(s: Settings) -> list[Check]:
    from worker.sandbox import check_backends, resolve_backend

    sandbox = as_worker_settings(s).sandbox
    found = check_backends(sandbox)
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
        out.append(Check("sandbox", "ok", f"jobs will use {resolve_backend(sandbox)}"))
    return out


def model_check(settings: Settings) -> Check:
    s = as_worker_settings(settings)
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
    from worker.model_choice import ModelNotReady, local_weights

    try:
        ready = local_weights(m, s.effective_weights_dir)
    except ModelNotReady as exc:
        return Check("model", "fail", f"{exc.problem} Run: {exc.fix.removeprefix('run ')}")
    return Check("model", "ok", f"{m.model}: weights at {ready.model}")


def semgrep_check(s: Settings) -> Check:
    from worker.gates.semgrep import SemgrepError, locate_semgrep, semgrep_version

    found = locate_semgrep(as_worker_settings(s).gates.semgrep_bin)
    if found.path is None:
        return Check(
            "semgrep",
            "fail",
            f"{found.problem}: the Semgrep gate blocks every patch. Run `make install` (its "
            "own venv from deploy/semgrep.lock, beside the app's), or set "
            "RIBBIT_GATES__SEMGREP_BIN to a semgrep executable",
        )
    try:
        version = semgrep_version(found.path)
    except SemgrepError as exc:
        return Check("semgrep", "fail", f"{found.path} ({found.source}) does not run: {exc}")
    detail = f"semgrep {version} at {found.path} ({found.source})"
    if Path(found.path).parent.resolve() == (Path(sys.prefix) / "bin").resolve():
        return Check(
            "semgrep",
            "warn",
            f"{detail} is installed in the app's own venv, where its pins and the app's "
            "constrain each other: install it apart (`make install`, deploy/semgrep.lock)",
        )
    return Check("semgrep", "ok", detail)
