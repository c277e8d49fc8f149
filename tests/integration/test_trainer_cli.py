"""``ribbit train`` end to end: stored environment, the configured real sandbox, the real
reward, the tiny model. A random model never solves the task, so every group has zero
variance and is filtered; the run must still finish, checkpoint and record itself."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli import main
from tests.conftest import require_service
from tests.plugins.trainer import PYTEST, FixRepo, calc_environment
from trainer.envs.storage import EnvironmentStore


@pytest.mark.integration
def test_train_command_runs_on_the_bubblewrap_sandbox(
    tiny_model_dir: Path,
    fix_with_new_test: FixRepo,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    require_service(shutil.which("bwrap") is not None, "bubblewrap")
    data = tmp_path / "data"
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(data))
    monkeypatch.setenv("RIBBIT_SANDBOX__BACKEND", "bubblewrap")
    env = calc_environment(
        fix_with_new_test, test_command=PYTEST.replace(sys.executable, "python3")
    )
    EnvironmentStore(data / "trainer").add(env, fix_with_new_test.path)
    out = tmp_path / "run"
    result = CliRunner().invoke(
        main,
        [
            "train",
            "--model",
            str(tiny_model_dir),
            "--steps",
            "1",
            "--group-size",
            "2",
            "--output-dir",
            str(out),
            "--register",
            "cand1",
            "--max-turns",
            "2",
            "--max-new-tokens",
            "32",
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    assert "run 1: 1 steps, mean reward 0.000 -> 0.000" in result.output
    assert (out / "step-1" / "adapter").is_dir()
    listed = CliRunner().invoke(main, ["model", "list"])
    assert "cand1\tcandidate" in listed.output
    evaluated = CliRunner().invoke(
        main,
        [
            "model",
            "evaluate",
            "cand1",
            "--envs",
            "all",
            "--k",
            "1",
            "--max-turns",
            "2",
            "--max-new-tokens",
            "32",
        ],
        catch_exceptions=False,
    )
    assert evaluated.exit_code == 0, evaluated.output
    assert "cand1: held-out pass rate 0.0% on 1 env(s)" in evaluated.output
    promoted = CliRunner().invoke(main, ["model", "promote", "cand1"])
    assert promoted.exit_code == 0, promoted.output
    listed = CliRunner().invoke(main, ["model", "list"])
    assert "cand1\tpromoted\theld-out 0.0%" in listed.output
    calibrated = CliRunner().invoke(
        main,
        [
            "envs",
            "calibrate",
            "--k",
            "2",
            "--max-turns",
            "2",
            "--max-new-tokens",
            "32",
        ],
        catch_exceptions=False,
    )
    assert calibrated.exit_code == 0, calibrated.output
    assert f"{env.instance_id}\tpass 0/2\tno signal" in calibrated.output
    stored = EnvironmentStore(data / "trainer").get(env.instance_id)
    assert (stored.calibration.k, stored.calibration.solved) == (2, 0)
    assert stored.calibration.model is not None and "adapter" in stored.calibration.model
