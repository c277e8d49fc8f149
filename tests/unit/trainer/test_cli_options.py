"""`ribbit train`'s options made from TrainSettings' fields (trainer/cli/options.py): every
field an option with its help, the options older than the generation kept as they were,
and a field added later an option with nothing else written."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import click
import pytest
from click.testing import CliRunner

from bot.cli import main
from trainer.cli.options import OptionOverride, settings_options
from trainer.cli.training import TRAIN_OVERRIDES, train
from trainer.config import TrainSettings


def _params(command: click.Command) -> dict[str, click.Parameter]:
    return {p.name: p for p in command.params if p.name is not None}


def _echoing(cls: type, overrides: dict[str, OptionOverride] | None = None) -> click.Command:
    """A command with ``cls``'s options that prints what it was given, as JSON."""

    @click.command()
    @settings_options(cls, overrides)
    def command(**values: Any) -> None:
        click.echo(json.dumps(values))

    return command


def test_cli_options_one_per_train_settings_field_with_its_help() -> None:
    params = _params(train)
    for f in dataclasses.fields(TrainSettings):
        option = params[f.name]
        assert isinstance(option, click.Option)
        assert str(f.metadata["help"]).rstrip(".") in (option.help or ""), f.name
        if f.name not in TRAIN_OVERRIDES:
            assert option.opts == ["--" + f.name.replace("_", "-")]
            assert option.default == f.default and option.show_default, f.name


# Every option `ribbit train` had before its options were made from TrainSettings, and
# its default (None: the deployment's, resolved as the run starts).
BEFORE = {
    "--envs": "all",
    "--steps": 100,
    "--group-size": 8,
    "--model": None,
    "--output-dir": None,
    "--learning-rate": 1e-5,
    "--finetune": "lora",
    "--resume": None,
    "--max-turns": 100,
    "--max-new-tokens": 8192,
    "--register": None,
    "--rollouts": "local",
    "--in-flight": 16,
    "--line": "default",
    "--heldout": None,
    "--heldout-k": 1,
    "--json": False,
    "--store": None,
}


def test_cli_options_train_keeps_every_option_and_default() -> None:
    by_flag = {flag: p for p in train.params for flag in p.opts}
    # What click gives when the option is not on the command line (a flag declared
    # without a default reads UNSET in .default from click 8.5, False through get_default).
    ctx = click.Context(train)
    for flag, default in BEFORE.items():
        assert flag in by_flag, flag
        assert by_flag[flag].get_default(ctx) == default, flag
    assert list(by_flag["--finetune"].type.choices) == ["lora", "full"]  # type: ignore[attr-defined]
    assert "(default: RIBBIT_MODEL__MODEL)" in (by_flag["--model"].help or "")  # type: ignore[attr-defined]
    assert "(default: DATA_DIR/trainer)" in (by_flag["--store"].help or "")  # type: ignore[attr-defined]


def test_cli_options_a_new_field_gets_an_option() -> None:
    @dataclass
    class Extended(TrainSettings):
        warmup_steps: int = field(default=0, metadata={"help": "Steps of linear warm-up."})

    command = _echoing(Extended, TRAIN_OVERRIDES)
    (option,) = [p for p in command.params if p.name == "warmup_steps"]
    assert option.opts == ["--warmup-steps"] and option.default == 0
    helped = CliRunner().invoke(command, ["--help"])
    assert "--warmup-steps INTEGER" in helped.output
    assert "Steps of linear warm-up." in helped.output
    given = CliRunner().invoke(command, ["--warmup-steps", "5", "--no-scale-by-std"])
    assert given.exit_code == 0, given.output
    values = json.loads(given.output)
    assert (values["warmup_steps"], values["scale_by_std"]) == (5, False)
    # What the options give unasked, deployment defaults filled in, is the dataclass's default.
    values = json.loads(CliRunner().invoke(command, []).output)
    filled = {**values, "model": "m", "store_dir": "s", "output_dir": "o"}
    assert Extended(**filled) == Extended(model="m", store_dir="s", output_dir="o")


def test_cli_options_types_from_annotations() -> None:
    @dataclass
    class Knobs:
        mode: Literal["a", "b"] = field(default="a", metadata={"help": "Which."})
        on: bool = field(default=False, metadata={"help": "Whether."})
        rate: float = field(default=0.5, metadata={"help": "How much."})
        where: str = field(default="here", metadata={"help": "A folder."})

    command = _echoing(Knobs, {"where": OptionOverride(flag="--at", folder=True)})
    runner = CliRunner()
    given = runner.invoke(command, ["--mode", "b", "--on", "--rate", "2", "--at", "x"])
    assert json.loads(given.output) == {"mode": "b", "on": True, "rate": 2.0, "where": "x"}
    assert runner.invoke(command, ["--mode", "c"]).exit_code == 2
    assert runner.invoke(command, ["--rate", "fast"]).exit_code == 2
    assert runner.invoke(command, ["--where", "x"]).exit_code == 2  # only its older name
    a_file = Path(__file__)
    assert runner.invoke(command, ["--at", str(a_file)]).exit_code == 2


def test_cli_options_refuse_what_they_cannot_make() -> None:
    @dataclass
    class Listed:
        names: list[str] = field(default_factory=list, metadata={"help": "Names."})

    with pytest.raises(TypeError, match="no option type for"):
        settings_options(Listed)
    with pytest.raises(TypeError, match="overrides name no field of TrainSettings: modle"):
        settings_options(TrainSettings, {"modle": OptionOverride(default_from="x")})


def test_cli_options_invalid_settings_are_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path))
    args = ["train", "--model", str(tmp_path), "--output-dir", str(tmp_path / "out")]
    result = CliRunner().invoke(main, [*args, "--group-size", "1"])
    assert result.exit_code == 1
    assert "Error: group_size must be >= 2 (GRPO compares rollouts); got 1" in result.output
    result = CliRunner().invoke(main, [*args, "--aggregation", "sum"])
    assert result.exit_code == 1 and "aggregation must be one of" in result.output
    assert not (tmp_path / "out").exists()


def test_cli_options_trainer_commands_load_without_torch() -> None:
    """The options are read from TrainSettings when the command loads, which `ribbit
    --help` does for every command: that must not import torch."""
    code = (
        "import sys, trainer.cli, trainer.config; "
        "sys.exit('torch' in sys.modules and 'torch was imported')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_cli_options_rollouts_are_the_services_modes() -> None:
    from typing import get_args

    from trainer.training_run import RolloutMode

    (rollouts,) = [p for p in train.params if p.name == "rollouts"]
    assert list(rollouts.type.choices) == list(get_args(RolloutMode))  # type: ignore[attr-defined]
