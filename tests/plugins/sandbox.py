"""Fixtures for the sandbox area (owned by that area)."""
