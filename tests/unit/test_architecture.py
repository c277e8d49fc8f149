"""The package layering in pyproject's [tool.importlinter] holds (issue #18)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_hold(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from importlinter.cli import lint_imports

    monkeypatch.chdir(ROOT)
    # grimp builds the graph from the source files; its cache would outlive a change.
    status = lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True)
    out = capsys.readouterr().out
    assert status == 0, out


def test_a_broken_layer_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checker can fail: bot importing the trainer outside the allowed places breaks it."""
    from importlinter.cli import lint_imports

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
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    # grimp finds the root packages through the import system: hide the real ones.
    for name in ("bot", "worker", "trainer"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert lint_imports(config_filename=str(config), no_cache=True, no_logo=True) == 1
