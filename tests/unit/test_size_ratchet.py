"""The size ratchet: every module of bot/, worker/ and trainer/ over 600 lines and every
function over 60 is listed, with its size, in tests/size_ratchet.txt, and none may be
added or grow, so the list only shrinks.

A function's size is ``end_lineno - lineno + 1`` of its ``def`` (decorators left out);
it is named ``path::Class.method`` (a nested function under its enclosing ones). A
module's is its number of lines.

When an entry shrank or went, tighten the list (it never loosens it)::

    python -m tests.unit.test_size_ratchet --tighten
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RATCHET = ROOT / "tests" / "size_ratchet.txt"
PACKAGES = ("bot", "worker", "trainer")
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60

HOW_TO_FIX = (
    "Split the module or function instead (the project keeps one job per module and small "
    "functions): extract a helper, a class or a module. Do not add the entry to "
    f"{RATCHET.relative_to(ROOT)}; it lists only what was already too big, so it can only "
    "shrink."
)


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = prefix + node.name
            assert node.end_lineno is not None
            yield name, node.end_lineno - node.lineno + 1
            yield from _functions(node, name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, prefix + node.name + ".")
        else:
            yield from _functions(node, prefix)


def measure(root: Path = ROOT) -> dict[str, int]:
    """Every module and function over its limit under ``root``, by name, with its size."""
    sizes: dict[str, int] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            module = path.relative_to(root).as_posix()
            lines = len(text.splitlines())
            if lines > MAX_MODULE_LINES:
                sizes[module] = lines
            for name, size in _functions(ast.parse(text, filename=module)):
                if size > MAX_FUNCTION_LINES:
                    sizes[f"{module}::{name}"] = max(size, sizes.get(f"{module}::{name}", 0))
    return sizes


def read_ratchet(path: Path = RATCHET) -> dict[str, int]:
    listed: dict[str, int] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            size, name = line.split(maxsplit=1)
            listed[name] = int(size)
    return listed


def problems(measured: dict[str, int], listed: dict[str, int]) -> tuple[list[str], list[str]]:
    """What grew or is new (to fix in the code), and what shrank or went (to tighten)."""
    grown = [
        f"{name}: {size} lines"
        + (f", listed at {listed[name]}" if name in listed else " (not listed: new)")
        for name, size in sorted(measured.items())
        if size > listed.get(name, 0)
    ]
    stale = [
        f"{name}: listed at {size}, now {measured.get(name, 'under the limit')}"
        for name, size in sorted(listed.items())
        if measured.get(name, 0) < size
    ]
    return grown, stale


def write_ratchet(sizes: dict[str, int], path: Path = RATCHET) -> None:
    header = (
        f"# Modules of {', '.join(PACKAGES)} over {MAX_MODULE_LINES} lines and functions over "
        f"{MAX_FUNCTION_LINES}, with their size in lines.\n"
        "# tests/unit/test_size_ratchet.py fails when an entry is added or grows; this list only\n"
        "# shrinks (python -m tests.unit.test_size_ratchet --tighten).\n"
    )
    modules = sorted(name for name in sizes if "::" not in name)
    functions = sorted(name for name in sizes if "::" in name)
    body = "".join(f"{sizes[name]} {name}\n" for name in modules + functions)
    path.write_text(header + body, encoding="utf-8")


def tighten(measured: dict[str, int], listed: dict[str, int]) -> dict[str, int]:
    """The list with each entry lowered to its size now, and gone ones dropped; nothing
    added, nothing raised."""
    return {name: min(size, measured[name]) for name, size in listed.items() if name in measured}


def test_nothing_grew_past_the_size_limits() -> None:
    grown, _ = problems(measure(), read_ratchet())
    assert not grown, "Grew past the size limits:\n  " + "\n  ".join(grown) + "\n" + HOW_TO_FIX


def test_the_list_is_tight() -> None:
    _, stale = problems(measure(), read_ratchet())
    assert not stale, (
        "Smaller than listed (good): lower the list so they cannot grow back:\n  "
        + "\n  ".join(stale)
        + "\nRun: python -m tests.unit.test_size_ratchet --tighten"
    )


def test_a_new_or_grown_entry_fails_and_a_shrunk_one_asks_to_tighten(tmp_path: Path) -> None:
    pkg = tmp_path / "bot"
    pkg.mkdir()
    body = "".join(f"        x{n} = {n}\n" for n in range(70))
    (pkg / "big.py").write_text(f"class C:\n    def long(self):\n{body}\n", encoding="utf-8")
    for package in PACKAGES[1:]:
        (tmp_path / package).mkdir()
    measured = measure(tmp_path)
    assert measured == {"bot/big.py::C.long": 71}
    assert problems(measured, {}) == (["bot/big.py::C.long: 71 lines (not listed: new)"], [])
    assert problems(measured, {"bot/big.py::C.long": 70})[0] == [
        "bot/big.py::C.long: 71 lines, listed at 70"
    ]
    assert problems(measured, {"bot/big.py::C.long": 72}) == (
        [],
        ["bot/big.py::C.long: listed at 72, now 71"],
    )
    assert problems(measured, {"bot/big.py::C.long": 71, "bot/gone.py": 700}) == (
        [],
        ["bot/gone.py: listed at 700, now under the limit"],
    )
    listed = {"bot/big.py::C.long": 80, "bot/gone.py": 700}
    assert tighten(measured | {"bot/new.py": 900}, listed) == {"bot/big.py::C.long": 71}
    ratchet = tmp_path / "ratchet.txt"
    write_ratchet(measured, ratchet)
    assert read_ratchet(ratchet) == measured


if __name__ == "__main__":
    if sys.argv[1:] != ["--tighten"]:
        sys.exit(f"usage: python -m tests.unit.test_size_ratchet --tighten\n{__doc__}")
    write_ratchet(tighten(measure(), read_ratchet()))
