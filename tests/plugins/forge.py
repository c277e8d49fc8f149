"""Fixtures for the forge area (owned by that area)."""
