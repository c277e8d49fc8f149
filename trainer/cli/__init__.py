"""The trainer's `ribbit` commands, one module per command group:

- ``envs`` (trainer/cli/environments.py): training environments (issue_comments.py:
  where ``envs build`` gets the issue's comments);
- ``train`` (trainer/cli/training.py): a GRPO run, over trainer/training_run.py;
- ``model`` (trainer/cli/versions.py): base weights and trained model versions;
- ``eval`` (trainer/cli/backtesting.py): a backtest on a repository's last fixes;

and what they share: the settings, the database, the environment folders and the options
that name them (trainer/cli/common.py), and click options made from a settings dataclass's
fields (trainer/cli/options.py; ``ribbit train``'s from TrainSettings).

pyproject's ``ribbit.commands`` entry points name the commands here. The bot's group
(bot/cli.py) loads them when run and passes its Settings as ``ctx.obj``; commands that
need none of it work without it. Each module imports what is heavy (torch, docker) inside
its commands, so ``ribbit --help`` stays quick.
"""

from trainer.cli.backtesting import eval_command
from trainer.cli.environments import envs
from trainer.cli.training import train
from trainer.cli.versions import model

__all__ = ["envs", "eval_command", "model", "train"]
