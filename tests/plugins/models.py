"""Fixtures for the models area (owned by that area)."""
