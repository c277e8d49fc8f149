"""The package layering in pyproject's [tool.importlinter] holds (issue #18)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# In a child process: import-linter's CLI configures logging with dictConfig, which would
# disable every logger already created in this test process.
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(cwd: Path, config: Path, pythonpath: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(config), "--no-cache"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_import_contracts_hold() -> None:
    done = lint_imports(ROOT, ROOT / "pyproject.toml", ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_broken_layer_is_caught(tmp_path: Path) -> None:
    """The checker can fail: bot importing the trainer outside the allowed places breaks it."""
    for package, body in {
        "bot": "from trainer import thing\n",
        "worker": "",
        "trainer": "thing = 1\n",
    }.items():
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text(body)
    config = tmp_path / "setup.cfg"
    config.write_text(
        "[importlinter]\nroot_packages =\n    bot\n    worker\n    trainer\n\n"
        "[importlinter:contract:layers]\nname = layers\ntype = layers\n"
        "layers =\n    trainer\n    worker\n    bot\n"
    )
    done = lint_imports(tmp_path, config, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "bot is not allowed to import trainer" in done.stdout
