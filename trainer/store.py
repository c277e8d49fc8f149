"""The trainer's store: its named queries over the training tables (environments,
training runs, model versions) and over the outcomes and jobs it trains on.

The tables are mapped in bot/store/training.py, next to their migration, so the worker and
the web app read them without importing the trainer; they are named here too because the
trainer's modules take them from their own store.
"""

from __future__ import annotations

from bot.store.training import ModelVersion, TrainingEnvironment, TrainingRun

__all__ = ["ModelVersion", "TrainingEnvironment", "TrainingRun"]
