"""GRPO-family reinforcement learning: advantages, loss, reward, rollouts, learner."""
