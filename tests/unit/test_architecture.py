"""The package layering in pyproject's [tool.importlinter] holds (issue #18)."""

from __future__ import annotations

import ast
import importlib
import os
import pkgutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
# In a child process: import-linter's CLI configures logging with dictConfig, which would
# disable every logger already created in this test process.
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(cwd: Path, config: Path, pythonpath: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(config), "--no-cache"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_import_contracts_hold() -> None:
    done = lint_imports(ROOT, ROOT / "pyproject.toml", ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_broken_layer_is_caught(tmp_path: Path) -> None:
    """The checker can fail: bot importing the trainer outside the allowed places breaks it."""
    for package, body in {
        "bot": "from trainer import thing\n",
        "worker": "",
        "trainer": "thing = 1\n",
    }.items():
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text(body)
    config = tmp_path / "setup.cfg"
    config.write_text(
        "[importlinter]\nroot_packages =\n    bot\n    worker\n    trainer\n\n"
        "[importlinter:contract:layers]\nname = layers\ntype = layers\n"
        "layers =\n    trainer\n    worker\n    bot\n"
    )
    done = lint_imports(tmp_path, config, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "bot is not allowed to import trainer" in done.stdout


# -- web -> kernel, never back (issue #37) -----------------------------------------------------

KERNEL_CONTRACT = "the kernel knows nothing of the web app"
OUTSIDE_CONTRACT = "the worker and the trainer know nothing of the web app"
# bot's modules outside the kernel contract: the web app itself, and the composition root
# that serves it (cli.py, run as __main__.py) and checks its configuration (doctor.py).
NOT_KERNEL = frozenset({"bot.web", "bot.cli", "bot.doctor", "bot.__main__"})


def contract(name: str) -> dict[str, Any]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts: list[dict[str, Any]] = config["tool"]["importlinter"]["contracts"]
    return next(c for c in contracts if c["name"] == name)


def test_every_kernel_module_is_held_to_the_web_contract() -> None:
    """A module added to bot/ is kernel unless it goes into bot/web/: the contract names
    each one, so none escapes it by being new."""
    modules = {f"bot.{m.name}" for m in pkgutil.iter_modules([str(ROOT / "bot")])}
    assert set(contract(KERNEL_CONTRACT)["source_modules"]) == modules - NOT_KERNEL


def _ini(key: str, contract: dict[str, Any]) -> str:
    lines = [f"[importlinter:contract:{key}]"]
    for field, value in contract.items():
        if isinstance(value, list):
            lines.append(f"{field} =" + "".join(f"\n    {v}" for v in value))
        else:
            lines.append(f"{field} = {value}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    "importer", [None, "bot.queue", "bot.store", "bot.settings", "worker", "trainer"]
)
def test_an_import_of_the_web_app_is_caught(tmp_path: Path, importer: str | None) -> None:
    """pyproject's own web contracts, on a tree of empty modules under their names: clean
    it passes (so a failure below is the contract's, not the set-up's); any kernel module,
    the worker or the trainer importing bot.web breaks it."""
    kernel, outside = contract(KERNEL_CONTRACT), contract(OUTSIDE_CONTRACT)
    modules = ["bot", "bot.web", "worker", "trainer", *kernel["source_modules"]]
    for module in modules:
        package = tmp_path.joinpath(*module.split("."))
        package.mkdir(exist_ok=True)
        body = "import bot.web\n" if module == importer else ""
        (package / "__init__.py").write_text(body)
    config = tmp_path / "setup.cfg"
    config.write_text(
        "[importlinter]\nroot_packages =\n    bot\n    worker\n    trainer\n\n"
        + _ini("kernel", kernel)
        + _ini("outside", outside)
    )
    done = lint_imports(tmp_path, config, tmp_path)
    if importer is None:
        assert done.returncode == 0, done.stdout + done.stderr
    else:
        assert done.returncode == 1, done.stdout + done.stderr
        assert f"{importer} -> bot.web" in done.stdout


# -- the stores own every query (issue #18) ---------------------------------------------------

# Where queries over the tables may be built: the store packages, each next to the tables
# it maps (bot/store/ holds every table and its Alembic migrations; trainer/store.py is the
# trainer's store over the training tables).
STORE_PATHS = ("bot/store/", "trainer/store.py")
# SQLAlchemy's statement builders: importing one is building a query.
_BUILDERS = frozenset(
    {
        "select",
        "insert",
        "update",
        "delete",
        "text",
        "func",
        "and_",
        "or_",
        "not_",
        "case",
        "exists",
        "literal",
        "literal_column",
        "bindparam",
        "union",
        "union_all",
        "Table",
        "MetaData",
        "inspect",
    }
)
# Calls that run a statement (Session.execute/scalar/scalars, the legacy Session.query,
# Connection.exec_driver_sql). Nothing else in the tree has methods of these names.
_RUNNERS = frozenset({"execute", "scalar", "scalars", "query", "exec_driver_sql"})
# Session methods that read or write a row by its mapped class without a statement.
_ROW_METHODS = frozenset({"get", "add", "add_all", "delete", "merge"})


def mapped_class_names() -> frozenset[str]:
    """Names of every class mapped to a table: the ORM registry once every store module is
    imported (a table mapped outside bot/store would be missed here, and is itself a
    store outside the stores: the migrations' metadata is bot.store.tables.Base's)."""
    import bot.store
    from bot.store.tables import Base

    for module in pkgutil.iter_modules(bot.store.__path__, "bot.store."):
        if module.name != "bot.store.migrations":
            importlib.import_module(module.name)
    return frozenset(m.class_.__name__ for m in Base.registry.mappers)


def query_uses(source: str, mapped: frozenset[str]) -> list[str]:
    """Where ``source`` builds or runs a query itself: a SQLAlchemy statement builder
    imported or reached through a module (``from sqlalchemy import select``,
    ``sa.sql.text``), a call that runs a statement (``.execute``, ``.scalar(s)``,
    ``.query``, also through ``getattr``), or a session call handed a mapped class or row
    (``session.get(Job, id)``, ``session.add(Job(...))``)."""
    tree = ast.parse(source)
    modules = _sqlalchemy_names(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and _is_sqlalchemy(node.module):
            found += [
                f"{node.lineno}: imports {node.module}.{a.name}"
                for a in node.names
                if a.name in _BUILDERS or a.name == "*"
            ]
        elif isinstance(node, ast.Attribute) and node.attr in _BUILDERS:
            if _root(node) in modules:
                found.append(f"{node.lineno}: uses {ast.unparse(node)}")
        elif isinstance(node, ast.Call):
            name = _called(node)
            if name in _RUNNERS:
                found.append(f"{node.lineno}: runs .{name}()")
            elif name in _ROW_METHODS and node.args and _names_mapped(node.args[0], mapped):
                found.append(f"{node.lineno}: .{name}() on a mapped class")
    return found


def _is_sqlalchemy(module: str | None) -> bool:
    return (module or "").split(".")[0] == "sqlalchemy"


def _sqlalchemy_names(tree: ast.Module) -> set[str]:
    """Names bound to SQLAlchemy or anything imported from it (``import sqlalchemy as
    sa``, ``from sqlalchemy import sql``), through which a builder can be reached."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {
                a.asname or a.name.split(".")[0] for a in node.names if _is_sqlalchemy(a.name)
            }
        elif isinstance(node, ast.ImportFrom) and _is_sqlalchemy(node.module):
            names |= {a.asname or a.name for a in node.names}
    return names


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _called(call: ast.Call) -> str | None:
    """The method a call names: ``x.execute(...)``, or ``getattr(x, "execute")(...)``."""
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if (
        isinstance(func, ast.Call)
        and getattr(func.func, "id", None) == "getattr"
        and len(func.args) >= 2
        and isinstance(func.args[1], ast.Constant)
    ):
        return str(func.args[1].value)
    return None


def _names_mapped(arg: ast.expr, mapped: frozenset[str]) -> bool:
    target = arg.func if isinstance(arg, ast.Call) else arg
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
    return name in mapped


def _outside_stores() -> list[Path]:
    found = []
    for package in ("bot", "worker", "trainer"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if not rel.startswith(STORE_PATHS):
                found.append(path)
    return found


def test_only_the_stores_build_queries() -> None:
    mapped = mapped_class_names()
    offenders = {
        path.relative_to(ROOT).as_posix(): uses
        for path in _outside_stores()
        if (uses := query_uses(path.read_text(), mapped))
    }
    assert offenders == {}, "queries outside the stores (move them into a store method):\n" + (
        "\n".join(f"{p}: {'; '.join(u)}" for p, u in offenders.items())
    )


def test_every_table_is_mapped_in_the_stores() -> None:
    """The scan knows the tables by the classes mapped in bot/store; these are all of them."""
    assert {
        "Job",
        "Outcome",
        "Repository",
        "NoisePause",
        "NotificationSent",
        "WorkerHeartbeat",
        "EnvironmentValidation",
        "ModelVersion",
        "TrainingEnvironment",
        "TrainingRun",
        "AdminAction",
    } <= mapped_class_names()


def test_the_query_scan_catches_each_kind() -> None:
    """The scan can fail: each way of querying outside a store is found."""
    mapped = frozenset({"Job"})
    planted = {
        "from sqlalchemy import select\n": "imports sqlalchemy.select",
        "from sqlalchemy.sql import text\n": "imports sqlalchemy.sql.text",
        "import sqlalchemy as sa\nq = sa.delete(t)\n": "uses sa.delete",
        "import sqlalchemy\nq = sqlalchemy.sql.expression.update(t)\n": "uses sqlalchemy.sql",
        "import sqlalchemy.sql.expression as e\nq = e.select(t)\n": "uses e.select",
        "from sqlalchemy import sql\nq = sql.text('SELECT 1')\n": "uses sql.text",
        "def f(s):\n    return getattr(s, 'execute')(q)\n": "runs .execute()",
        "def f(s):\n    return s.execute(q)\n": "runs .execute()",
        "def f(ctx):\n    return ctx.session.scalars(q)\n": "runs .scalars()",
        "def f(s):\n    return s.query(Job).all()\n": "runs .query()",
        "def f(s, i):\n    return s.get(Job, i)\n": ".get() on a mapped class",
        "def f(s):\n    s.add(Job(id='x'))\n": ".add() on a mapped class",
        "def f(s, m):\n    s.delete(m.Job)\n": ".delete() on a mapped class",
    }
    for source, what in planted.items():
        assert [u for u in query_uses(source, mapped) if what in u], source
    # Things that are not queries: a dict's get, a store's named method, a Session type.
    clean = (
        "from sqlalchemy.orm import Session\n"
        "def f(store, s: Session, d):\n"
        "    d.get('Job')\n"
        "    return store.active_for_issue(s, 'github', 'o/r', 1)\n"
    )
    assert query_uses(clean, mapped) == []


# -- the packages' docs describe the tree as it is (issue #18) --------------------------------


# Each package says what its modules are in its docstring, and its README where it has one
# (the agent's and the trainer's module tables).
def packages() -> list[Path]:
    return sorted(
        init.parent
        for package in ("bot", "worker", "trainer")
        for init in (ROOT / package).rglob("__init__.py")
    )


def package_doc(package: Path) -> str:
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    readme = package / "README.md"
    return doc + (readme.read_text() if readme.is_file() else "")


def undocumented(package: Path) -> list[str]:
    """The modules and subpackages of ``package`` that its docstring and README never name
    (as ``name.py``, ``name/`` or, in reST, ``:mod:`.name```)."""
    names = [
        f"{child.name}/" if child.is_dir() else child.name
        for child in sorted(package.iterdir())
        if (child.suffix == ".py" and not child.name.startswith("__"))
        or (child.is_dir() and (child / "__init__.py").is_file())
    ]
    doc = package_doc(package)
    return [
        name
        for name in names
        if name not in doc and f":mod:`.{name.removesuffix('.py').rstrip('/')}`" not in doc
    ]


def test_each_package_names_its_modules() -> None:
    assert len(packages()) >= 15  # bot, worker, trainer and their subpackages
    missing = {
        p.relative_to(ROOT).as_posix(): names for p in packages() if (names := undocumented(p))
    }
    assert missing == {}, f"modules their package's docstring or README never names: {missing}"


def test_a_module_the_docs_never_name_is_caught(tmp_path: Path) -> None:
    (tmp_path / "__init__.py").write_text(
        '"""- one.py: the first.\n- sub/: the rest.\n- :mod:`.three`: the third."""\n'
    )
    for name in ("one.py", "two.py", "three.py", "__main__.py"):
        (tmp_path / name).write_text("")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "__init__.py").write_text("")
    (tmp_path / "data").mkdir()  # not a package
    assert undocumented(tmp_path) == ["two.py"]
