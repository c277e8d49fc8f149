"""The guards on pytest's objects (worker/gates/watchguard.py), in this process: they
forward, survive what the guarded object raises, record the repository's reach, and
give nothing to whoever calls their generator directly."""

from __future__ import annotations

from typing import Any

from worker.gates import watchguard

Recorded = list[tuple[str, str, str | None, int]]


class _Config:
    def __init__(self) -> None:
        self.option = "value"


def _guarded(asker: tuple[str, int] | None) -> tuple[Any, Recorded]:
    recorded: Recorded = []

    def record(mechanism: str, what: str, path: str | None, line: int) -> None:
        recorded.append((mechanism, what, path, line))

    guard = watchguard._guard(_Config(), "config", record, lambda frame: asker)
    return guard, recorded


def test_a_guard_forwards_and_survives_what_the_object_raises() -> None:
    guard, recorded = _guarded(None)  # pytest's own code asking: nothing recorded
    assert not hasattr(guard, "missing")  # AttributeError from the object, raised again
    assert guard.option == "value"  # and the guard still works
    guard.option = "changed"
    assert guard.option == "changed" and "_Config" in repr(guard)
    assert recorded == []


def test_a_guard_refuses_dunders_but_its_class() -> None:
    guard, _ = _guarded(None)
    assert guard.__class__ is _Config  # isinstance against the object's class holds
    assert isinstance(guard, _Config)
    for name in ("__dict__", "__reduce_ex__", "__reduce__", "__getstate__"):
        assert not hasattr(guard, name), name  # no copy or pickle of what it guards


def test_the_repositorys_reach_is_recorded_where_it_asked() -> None:
    guard, recorded = _guarded(("calc/__init__.py", 7))
    assert guard.option == "value"
    assert recorded == [
        ("runner-reach", "pytest's config reached (.option)", "calc/__init__.py", 7)
    ]


def test_calling_the_guards_generator_directly_gets_nothing_and_is_recorded() -> None:
    guard, recorded = _guarded(("calc/__init__.py", 3))
    method = type(guard).__getattribute__
    (cell,) = method.__closure__ or ()
    send = cell.cell_contents  # what the guard's method holds: the generator's send
    assert send(("get", "option", None)) == (None, None)
    assert recorded == [
        ("runner-reach", "Ribbit's guard of pytest's config called", "calc/__init__.py", 3)
    ]
    assert method.__globals__ == {"__builtins__": {"AttributeError": AttributeError}}
