"""Stored JSON read tolerantly (bot/store/tolerant.py): a value of the wrong type is absent."""

from __future__ import annotations

from typing import Any

import pytest

from bot.store.tolerant import opt_dict, opt_int, opt_str


@pytest.mark.parametrize("value", [None, 1, 1.5, [1], {"a": 1}, True])
def test_a_string_that_is_not_one_reads_as_absent(value: Any) -> None:
    assert opt_str(value) is None


@pytest.mark.parametrize("value", [None, 1, "{}", [("a", 1)], True])
def test_an_object_that_is_not_one_reads_as_absent(value: Any) -> None:
    assert opt_dict(value) is None


@pytest.mark.parametrize("value", [True, False, 2.0, "2", None])
def test_a_count_is_an_int_and_never_a_bool(value: Any) -> None:
    """JSON's true is not a count, though Python's bool is an int."""
    assert opt_int(value) is None


def test_values_of_their_type_read_as_they_are() -> None:
    assert opt_str("") == "" and opt_str("x") == "x"
    assert opt_int(0) == 0 and opt_int(-7) == -7
    assert opt_dict({}) == {} and opt_dict({"a": [1]}) == {"a": [1]}
