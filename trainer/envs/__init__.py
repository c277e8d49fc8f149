"""Training environments built from merged fixes, in a SWE-bench-compatible shape."""

from trainer.envs.schema import Calibration, Environment, Provenance, Rejection

__all__ = ["Calibration", "Environment", "Provenance", "Rejection"]
