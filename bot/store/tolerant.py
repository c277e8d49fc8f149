"""Reading stored JSON tolerantly: rows outlive the code that wrote them, so a value of
the wrong type reads as absent instead of failing the page or the job that reads it."""

from __future__ import annotations

from typing import Any


def opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def opt_int(value: Any) -> int | None:
    """An int, never a bool (JSON's true is not a count)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def opt_dict(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None
