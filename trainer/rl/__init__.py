"""GRPO-family reinforcement learning: advantages, loss, reward, rollouts, learner.

- advantages.py, loss.py: the group-relative advantages and the clipped loss, as pure
  functions; learner.py: log-probs under the current weights and the updates.
- reward.py: a patch's reward on an environment (its tests, Semgrep and hygiene).
- rollout.py: the production episode, G times per environment; where a step's rollouts
  run: in this process (sources.py), on the worker fleet (remote.py) or through the
  inference servers that serve users (served.py).
- tamper.py: tamper as a training signal: the tamper rate per step, tampering episodes
  kept for inspection (tampered.jsonl).
- toy.py: the toy environment the CPU training test learns.
"""
