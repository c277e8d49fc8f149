"""Ribbit's trainer: turns the bot's outcomes into training environments and the model
into better versions (see trainer/README.md).

- envs/: training environments built from merged fixes (SWE-bench-compatible schema),
  their folders on disk (envs/folders.py), export and re-validation.
- rl/: GRPO-family reinforcement learning (advantages, loss, reward, rollouts, learner);
  train.py: the training loop; training_run.py: one run as `ribbit train` makes it;
  config.py: its settings; distributed.py: data-parallel ranks (FSDP2).
- registry.py: model versions (register, promote, roll back); evaluate.py, passk.py,
  calibrate.py: held-out scores and calibration; backtest.py: `ribbit eval`.
- store.py: the trainer's named queries (the tables are mapped in bot/store/training.py);
  data.py: one repository's training data.
- cli/ and data_cli.py: its `ribbit` commands, registered as pyproject's
  ``ribbit.commands`` entry points; the model registry and environment re-validation the
  web app offers are its ``ribbit.web`` entry points, the rollout queue's Celery app its
  ``ribbit.queues`` one.

The trainer builds on worker/ (the same episode, sandboxes and gates) and bot/, never
the other way.
"""
