"""The test environment a Python repository declares for its tools, read to what pip
must install: the first found, in a fixed order (:func:`tests_environment`).

1. PEP 735 ``[dependency-groups]``: ``test``, ``tests``, ``testing``
   (worker/sandbox/depgroups.py).
2. hatch: ``[envs.test]``, ``[envs.tests]``, then ``[envs.hatch-test]`` of
   ``hatch.toml``, else of ``pyproject.toml``'s ``[tool.hatch]``: ``dependencies``,
   ``extra-dependencies`` and ``features`` (the project's extras), following
   ``template`` (``default`` for every environment but hatch's own ``hatch-test``).
3. pdm: ``[tool.pdm.dev-dependencies]`` ``test``, ``tests``, ``testing``.
4. tox: ``tox.ini`` (else ``setup.cfg``'s, else ``pyproject.toml``'s ``[tool.tox]``,
   its ``legacy_tox_ini`` or tox 4's native tables): ``deps`` and ``extras`` of
   ``[testenv:tests]``/``[testenv:test]`` where declared, else of ``[testenv]``.
5. nox: the ``tests``/``test`` session of ``noxfile.py`` (worker/sandbox/noxsessions.py).
6. When the project has no test extra: PEP 735 ``dev``, then pdm's ``dev``.

One source, not their union: each is a complete statement of what the tests need, and
two of them can pin the same package differently. Only the base tree's files are read,
never run; a factor-conditional tox line (``py311: foo``) is skipped, since which factor
a bare run gets is tox's choice.
"""

from __future__ import annotations

import configparser
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from packaging.utils import canonicalize_name

from worker.sandbox.depgroups import GroupRequirements, group_for_tests
from worker.sandbox.noxsessions import nox_test_session
from worker.sandbox.pipwords import PipInputs, PipWordsError

Reader = Callable[[str], "str | None"]

_TEST_NAMES = ("test", "tests", "testing")
_HATCH_ENVS = ("test", "tests", "hatch-test")
# How far `template` and `{[section]key}` chains are followed: real ones are one or two
# deep, and a cycle must end.
_MAX_DEPTH = 8
# A tox factor condition before a dependency: `py311: foo`, `!pypy,lint: bar`.
_FACTOR_PREFIX = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-,!{}")


@dataclass(frozen=True)
class TestEnvironment:
    """What one declared test environment asks pip for."""

    source: str
    """The file and table it was read from, for the set-up step and its failures."""
    requirements: tuple[str, ...]
    requirement_files: tuple[str, ...]
    constraint_files: tuple[str, ...]
    extras: tuple[str, ...]
    """The project's own extras it installs (hatch ``features``, tox ``extras``)."""

    @property
    def lists_anything(self) -> bool:
        return any((self.requirements, self.requirement_files, self.constraint_files, self.extras))


class TestEnvironmentError(ValueError):
    """The chosen environment names something Ribbit cannot install; the message says
    which file, which table and which entry."""


def tests_environment(
    pyproject: Mapping[str, Any], files: Reader, *, has_test_extra: bool
) -> TestEnvironment | None:
    """The first test environment the tree declares (the module's order), or None.

    Raises TestEnvironmentError (or DependencyGroupError) when it cannot be installed."""
    try:
        for rule in (_group, _hatch, _pdm, _tox, _nox):
            found = rule(pyproject, files)
            # One that lists nothing (tox's `[testenv]` with only `commands`) says nothing
            # of what the tests need: the next source may.
            if found is not None and found.lists_anything:
                return found
        if not has_test_extra:
            return _group(pyproject, files, dev=True) or _pdm(pyproject, files, dev=True)
    except PipWordsError as exc:
        raise TestEnvironmentError(str(exc)) from None
    return None


def _record(source: str, inputs: PipInputs) -> TestEnvironment:
    return TestEnvironment(
        source,
        tuple(inputs.requirements),
        tuple(inputs.requirement_files),
        tuple(inputs.constraint_files),
        tuple(inputs.extras),
    )


def _group(
    pyproject: Mapping[str, Any], files: Reader, dev: bool = False
) -> TestEnvironment | None:
    # depgroups picks a test group first itself; `dev` only on the fallback pass.
    group: GroupRequirements | None = group_for_tests(pyproject, dev_fallback=dev)
    if group is None:
        return None
    return TestEnvironment(
        f"pyproject.toml [dependency-groups] {group.group}", group.requirements, (), (), ()
    )


def _strings(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise TestEnvironmentError(f"{where}: not a list of strings")
    return list(value)


def _hatch(pyproject: Mapping[str, Any], files: Reader) -> TestEnvironment | None:
    source, envs = "hatch.toml", _hatch_envs(files)
    if envs is None:
        source = "pyproject.toml [tool.hatch]"
        tool = pyproject.get("tool")
        hatch = tool.get("hatch") if isinstance(tool, dict) else None
        envs = hatch.get("envs") if isinstance(hatch, dict) else None
    if not isinstance(envs, dict):
        return None
    name = next((n for n in _HATCH_ENVS if isinstance(envs.get(n), dict)), None)
    if name is None:
        return None
    chain = _hatch_chain(envs, name)
    where = f"{source} envs.{name}"
    inputs = PipInputs()
    # `dependencies` and `features` are the nearest environment's; `extra-dependencies`
    # add up along the chain, which is what they are for.
    nearest = {
        key: next((env[key] for env in chain if key in env), None)
        for key in ("dependencies", "features")
    }
    extra = [
        dep for env in reversed(chain) for dep in _strings(env.get("extra-dependencies"), where)
    ]
    inputs.add_words(_strings(nearest["dependencies"], where) + extra, where)
    inputs.extras.extend(f for f in _strings(nearest["features"], where) if f not in inputs.extras)
    return _record(where, inputs)


def _hatch_envs(files: Reader) -> dict[str, Any] | None:
    text = files("hatch.toml")
    if text is None:
        return None
    try:
        envs = tomllib.loads(text).get("envs")
    except tomllib.TOMLDecodeError:
        return None
    return envs if isinstance(envs, dict) else None


def _hatch_chain(envs: Mapping[str, Any], name: str) -> list[dict[str, Any]]:
    """The environment, then its template, and so on (a cycle ends the chain)."""
    chain: list[dict[str, Any]] = []
    seen: set[str] = set()
    current: str | None = name
    while current is not None and current not in seen and len(chain) < _MAX_DEPTH:
        env = envs.get(current)
        if not isinstance(env, dict):
            break
        seen.add(current)
        chain.append(env)
        # hatch's own test environment stands alone unless it names a template.
        template = env.get("template", None if current in ("default", "hatch-test") else "default")
        current = template if isinstance(template, str) else None
    return chain


def _pdm(pyproject: Mapping[str, Any], files: Reader, dev: bool = False) -> TestEnvironment | None:
    tool = pyproject.get("tool")
    pdm = tool.get("pdm") if isinstance(tool, dict) else None
    groups = pdm.get("dev-dependencies") if isinstance(pdm, dict) else None
    if not isinstance(groups, dict):
        return None
    names: dict[str, str] = {canonicalize_name(name): name for name in groups}
    wanted = ("dev",) if dev else _TEST_NAMES
    chosen = next((names[n] for n in wanted if n in names), None)
    if chosen is None:
        return None
    where = f"pyproject.toml [tool.pdm.dev-dependencies] {chosen}"
    inputs = PipInputs()
    for entry in _strings(groups[chosen], where):
        inputs.add_line(entry, where)
    return _record(where, inputs)


def _tox(pyproject: Mapping[str, Any], files: Reader) -> TestEnvironment | None:
    for name in ("tox.ini", "setup.cfg"):
        text = files(name)
        if text is not None and (name == "tox.ini" or "[tox:tox]" in text):
            return _tox_ini(text, name)
    tool = pyproject.get("tool")
    tox = tool.get("tox") if isinstance(tool, dict) else None
    if not isinstance(tox, dict):
        return None
    if isinstance(tox.get("legacy_tox_ini"), str):
        return _tox_ini(tox["legacy_tox_ini"], "pyproject.toml [tool.tox] legacy_tox_ini")
    return _tox_toml(tox)


def _tox_ini(text: str, name: str) -> TestEnvironment | None:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    section = next(
        (s for s in ("testenv:tests", "testenv:test", "testenv") if parser.has_section(s)), None
    )
    if section is None:
        return None
    where = f"{name} [{section}]"

    def value(key: str) -> str:
        # A named environment inherits what it does not set from [testenv].
        for candidate in (section, "testenv"):
            if parser.has_option(candidate, key):
                return parser.get(candidate, key)
        return ""

    inputs = PipInputs()
    for line in _tox_lines(parser, value("deps"), where, depth=0):
        inputs.add_line(line, where)
    for extra in value("extras").replace(",", "\n").split():
        if extra not in inputs.extras:
            inputs.extras.append(extra)
    return _record(where, inputs)


def _tox_lines(parser: configparser.ConfigParser, text: str, where: str, depth: int) -> list[str]:
    lines: list[str] = []
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        prefix, colon, _ = line.partition(": ")
        if colon and set(prefix) <= _FACTOR_PREFIX and not prefix.startswith("{["):
            continue  # factor-conditional: which factors a bare run has is tox's choice
        line = line.replace("{toxinidir}", ".").replace("{tox_root}", ".")
        if line.startswith("{[") and line.endswith("}") and "]" in line:
            ref_section, _, key = line[2:-1].partition("]")
            if depth >= _MAX_DEPTH or not parser.has_option(ref_section, key):
                raise TestEnvironmentError(f"{where}: {line} names no setting")
            lines += _tox_lines(parser, parser.get(ref_section, key), where, depth + 1)
            continue
        lines.append(line)
    return lines


def _tox_toml(tox: Mapping[str, Any]) -> TestEnvironment | None:
    envs: dict[str, Any] = tox["env"] if isinstance(tox.get("env"), dict) else {}
    base: dict[str, Any] = tox["env_run_base"] if isinstance(tox.get("env_run_base"), dict) else {}
    name = next((n for n in ("tests", "test") if isinstance(envs.get(n), dict)), None)
    env: dict[str, Any] = {**base, **(envs[name] if name else {})}
    if not env:
        return None
    where = f"pyproject.toml [tool.tox.{'env.' + name if name else 'env_run_base'}]"
    inputs = PipInputs()
    for line in _strings(env.get("deps"), f"{where} deps"):
        inputs.add_line(line, where)
    inputs.extras.extend(e for e in _strings(env.get("extras"), where) if e not in inputs.extras)
    return _record(where, inputs)


def _nox(pyproject: Mapping[str, Any], files: Reader) -> TestEnvironment | None:
    text = files("noxfile.py")
    if text is None:
        return None
    session = nox_test_session(text)
    if session is None:
        return None
    where = f"noxfile.py session {session.name}"
    if session.unreadable:
        raise TestEnvironmentError(f"{where}: {session.unreadable}")
    inputs = PipInputs()
    for words in session.installs:
        inputs.add_words(words, where)
    return _record(where, inputs)
