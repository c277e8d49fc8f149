"""Training environments built from merged fixes, in a SWE-bench-compatible shape.

- schema.py: what an environment is; builder.py: one built from a fix (its tests run
  before and after, flaky ones dropped), with patches.py splitting the fix's diff;
  revalidate.py: a stored one validated again.
- candidates.py: what to build from the outcomes; lines.py: one model line's share;
  splits.py: its held-out split, and the only way training picks environments.
- folders.py: environments on disk; index.py: their mirror in the database; export.py:
  the record shapes other RL stacks read, with the eval script that grades a patch;
  evalcheck.py: that script's Python, which runs the tests watched and judges them.
"""

from trainer.envs.schema import Calibration, Environment, Provenance, Rejection

__all__ = ["Calibration", "Environment", "Provenance", "Rejection"]
