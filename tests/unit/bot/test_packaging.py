"""pyproject.toml: the web app installs light, and every imported package is declared."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

from worker.gates.watch import _INLINED

ROOT = Path(__file__).resolve().parents[3]
# Files that run inside the sandbox, under the repository's own interpreter and packages,
# never in Ribbit's: the watched run's bootstrap and the parts inlined into it import
# the pytest they watch there.
SANDBOX_SIDE = {
    "worker/gates/watchboot.py",
    *(f"worker/gates/{part}" for part in _INLINED.values()),
}
HEAVY = {"torch", "transformers", "semgrep", "docker", "peft", "accelerate", "huggingface-hub"}


def _project() -> dict[str, object]:
    data: dict[str, object] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return data


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\[<>=~! ;]", r, maxsplit=1)[0].lower() for r in requirements}


def _imports(package: str) -> set[str]:
    found: set[str] = set()
    for path in (ROOT / package).rglob("*.py"):
        if path.relative_to(ROOT).as_posix() in SANDBOX_SIDE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    own = {"bot", "worker", "trainer", "__future__"}
    return {m for m in found if m not in sys.stdlib_module_names and m not in own}


def _distributions(modules: set[str]) -> set[str]:
    """Distribution names of imported modules; one not installed here (bitsandbytes, a GPU
    extra) must be declared under its own name."""
    mapping = packages_distributions()
    return {(mapping[m][0] if m in mapping else m).lower().replace("_", "-") for m in modules}


def test_packaging_base_install_has_no_model_sandbox_or_scanner_libraries() -> None:
    base = _names(_project()["dependencies"])  # type: ignore[arg-type]
    assert not base & HEAVY, base & HEAVY
    extras: dict[str, list[str]] = _project()["optional-dependencies"]  # type: ignore[assignment]
    # Semgrep is the worker's too, but from its own virtualenv and lock (deploy/semgrep.lock),
    # so its pins never fight the app's.
    assert _names(extras["worker"]) >= HEAVY - {"semgrep"}
    assert "semgrep" not in _names(extras["worker"])
    assert {"ribbit"} <= _names(extras["train"]) and {"ribbit"} <= _names(extras["gpu"])


def test_packaging_every_imported_package_is_declared() -> None:
    project = _project()
    extras: dict[str, list[str]] = project["optional-dependencies"]  # type: ignore[assignment]
    base = _names(project["dependencies"])  # type: ignore[arg-type]
    # The web app and CLI import nothing beyond the base install.
    undeclared = _distributions(_imports("bot")) - base
    assert not undeclared, f"bot/ imports undeclared packages: {undeclared}"
    with_extras = base | _names(extras["worker"]) | _names(extras["gpu"])
    for package in ("worker", "trainer"):
        undeclared = _distributions(_imports(package)) - with_extras
        assert not undeclared, f"{package}/ imports undeclared packages: {undeclared}"
