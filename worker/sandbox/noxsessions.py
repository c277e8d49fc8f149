"""The test session of a ``noxfile.py``, read with :mod:`ast`, never run.

A noxfile is Python: what it installs can be computed, read from the environment or
fetched. Set-up detection only takes what it spells literally: the
``session.install(...)`` calls of the session named ``tests`` (else ``test``), their
string arguments, and ``*NAME`` where ``NAME`` is a module-level list or tuple of
strings. Anything else in such a call makes the session unreadable, said plainly, rather
than installed in part.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

_SESSION_NAMES = ("tests", "test")


@dataclass(frozen=True)
class NoxSession:
    """A test session's installs, as pip's words (one tuple per ``install`` call)."""

    name: str
    installs: tuple[tuple[str, ...], ...]
    unreadable: str | None
    """Why its installs cannot be read literally (the first such call), or None."""


def nox_test_session(source: str) -> NoxSession | None:
    """The ``tests`` (else ``test``) session of a noxfile's text, or None when it has
    none (or is no Python)."""
    try:
        module = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    sessions = {
        name: node
        for node in module.body
        if isinstance(node, ast.FunctionDef) and (name := _session_name(node)) is not None
    }
    name = next((n for n in _SESSION_NAMES if n in sessions), None)
    if name is None:
        return None
    return _read_session(name, sessions[name], _string_lists(module))


def _is_session_decorator(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Attribute):
        return target.attr == "session" and isinstance(target.value, ast.Name)
    return isinstance(target, ast.Name) and target.id == "session"


def _session_name(function: ast.FunctionDef) -> str | None:
    for decorator in function.decorator_list:
        if not _is_session_decorator(decorator):
            continue
        if isinstance(decorator, ast.Call):
            for keyword in decorator.keywords:
                if keyword.arg == "name" and isinstance(keyword.value, ast.Constant):
                    return str(keyword.value.value)
        return function.name
    return None


def _string_lists(module: ast.Module) -> dict[str, tuple[str, ...]]:
    """Module-level ``NAME = [...]`` / ``(...)`` assignments of string literals only."""
    found: dict[str, tuple[str, ...]] = {}
    for node in module.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target, value = node.targets[0], node.value
        if isinstance(target, ast.Name) and isinstance(value, (ast.List, ast.Tuple)):
            items = [_literal(item) for item in value.elts]
            if all(item is not None for item in items):
                found[target.id] = tuple(item for item in items if item is not None)
    return found


def _literal(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _read_session(
    name: str, function: ast.FunctionDef, lists: dict[str, tuple[str, ...]]
) -> NoxSession:
    parameter = function.args.args[0].arg if function.args.args else "session"
    installs: list[tuple[str, ...]] = []
    # ast.walk is breadth-first; the file's order is the one the session runs them in.
    calls = sorted(
        (node for node in ast.walk(function) if isinstance(node, ast.Call)),
        key=lambda call: (call.lineno, call.col_offset),
    )
    for node in calls:
        if not (
            isinstance(node.func, ast.Attribute)
            and node.func.attr == "install"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == parameter
        ):
            continue
        words: list[str] = []
        for arg in node.args:
            literal = _literal(arg)
            if literal is not None:
                words.append(literal)
            elif (
                isinstance(arg, ast.Starred)
                and isinstance(arg.value, ast.Name)
                and arg.value.id in lists
            ):
                words.extend(lists[arg.value.id])
            else:
                why = f"line {node.lineno}: an install argument that is not a literal string"
                return NoxSession(name, tuple(installs), why)
        installs.append(tuple(words))
    return NoxSession(name, tuple(installs), None)
