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


def opt_bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def opt_float(value: Any) -> float | None:
    """A JSON number, kept as stored (an int stays an int, so it is written back the
    same); never a bool."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def opt_str_list(value: Any) -> tuple[str, ...] | None:
    """A list of strings (None if anything in it is not one)."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return tuple(value)
