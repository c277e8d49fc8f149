"""Inference-server command lines read as the pinned servers read them, offline.

deploy/server-flags.json (written by scripts/server-flags.py from the vLLM and SGLang
wheels' own source) lists each server's flags and the LoRA assertions it makes at
start-up. `problems` parses a command line against it, as argparse would (unknown flag,
a value on a switch, a value of the wrong type or outside the flag's literal choices),
then evaluates each assertion whose guards hold over the flags' defaults overlaid with
the command line's values. The assertions are evaluated by a small interpreter over
their syntax tree, never `eval`: names are `self.<dest>`, `len` and the check's own locals.
"""

from __future__ import annotations

import ast
import json
import operator
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
VENDORED = DEPLOY / "server-flags.json"
# How each image starts its server: what precedes the server's own arguments.
# The vLLM image's entrypoint is `vllm serve`, so Compose passes the arguments alone.
LAUNCHERS: dict[str, tuple[list[str], ...]] = {
    "vllm": (["vllm", "serve"], []),
    "sglang": (["python3", "-m", "sglang.launch_server"],),
}


@dataclass(frozen=True)
class ServerCommand:
    where: str
    server: str
    argv: tuple[str, ...]


def vendored() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(VENDORED.read_text())
    return data


def server_of(image: str) -> str:
    if "vllm" in image:
        return "vllm"
    if "sglang" in image:
        return "sglang"
    raise ValueError(f"no known inference server in image {image!r}")


def strip_launcher(server: str, argv: list[str], where: str) -> tuple[str, ...]:
    for prefix in LAUNCHERS[server]:
        if argv[: len(prefix)] == prefix:
            return tuple(argv[len(prefix) :])
    raise ValueError(f"{where}: {argv[:3]} does not start {server}")


def compose_commands() -> list[ServerCommand]:
    data = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    found = []
    for name, service in data["services"].items():
        image = service.get("image", "")
        if "vllm" in image or "sglang" in image:
            server = server_of(image)
            where = f"compose.yaml services.{name}"
            found.append(
                ServerCommand(where, server, strip_launcher(server, service["command"], where))
            )
    return found


def _merge(into: dict[str, Any], overlay: dict[str, Any]) -> None:
    # Helm's merge: maps merge, everything else (lists included) is replaced.
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def helm_commands() -> list[ServerCommand]:
    chart = DEPLOY / "helm" / "ribbit"
    found = []
    for overlay in [None, *sorted(chart.glob("values-*.yaml"))]:
        values = yaml.safe_load((chart / "values.yaml").read_text())
        if overlay is not None:
            _merge(values, yaml.safe_load(overlay.read_text()) or {})
        inference = values["inference"]
        server = server_of(inference["image"])
        where = f"helm values.yaml + {overlay.name if overlay else '(no overlay)'}"
        argv = [*inference["command"], *inference["args"]]
        found.append(ServerCommand(where, server, strip_launcher(server, argv, where)))
    return found


def _convert(value: str, flag: dict[str, Any]) -> Any:
    kind: Callable[[str], Any] = {"int": int, "float": float}.get(flag["type"], str)
    return kind(value)


def parse(server: dict[str, Any], argv: tuple[str, ...]) -> tuple[dict[str, Any], list[str]]:
    """(the values argparse would set, what it would refuse)."""
    flags: dict[str, Any] = server["flags"]
    values: dict[str, Any] = {}
    errors: list[str] = []
    positional = list(server["positional"])
    tokens = list(argv)
    while tokens:
        token = tokens.pop(0)
        if not token.startswith("-"):
            if positional:
                values[positional.pop(0)] = token
            else:
                errors.append(f"unrecognized argument {token!r}")
            continue
        name, has_value, inline = token.partition("=")
        flag = flags.get(name)
        if flag is None:
            errors.append(f"unrecognized argument {name}")
            continue
        if flag["kind"] == "switch":
            if has_value:
                errors.append(f"{name} takes no value")
            values[flag["dest"]] = not flag.get("negates", False)
            continue
        if flag["kind"] == "optional-value":
            values[flag["dest"]] = inline if has_value else True
            continue
        if has_value:
            raw = [inline]
        elif flag["kind"] == "list":
            raw = []
            while tokens and not tokens[0].startswith("-"):
                raw.append(tokens.pop(0))
        elif tokens:
            raw = [tokens.pop(0)]
        else:
            raw = []
        if not raw and flag["kind"] != "list":
            errors.append(f"{name} expects a value")
            continue
        try:
            converted = [_convert(item, flag) for item in raw]
        except ValueError:
            errors.append(f"{name}: {raw} is not {flag['type']}")
            continue
        choices = flag["choices"]
        if isinstance(choices, list) and any(item not in choices for item in converted):
            errors.append(f"{name}: {raw} not one of {choices}")
            continue
        values[flag["dest"]] = converted if flag["kind"] == "list" else converted[0]
    return values, errors


def defaults(server: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for flag in server["flags"].values():
        default = flag["default"]
        # A default written as an expression (another class's attribute) is unknown here.
        found.setdefault(flag["dest"], None if isinstance(default, dict) else default)
    return found


_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.BitAnd: operator.and_,
}


def evaluate(text: str, namespace: dict[str, Any], let: dict[str, str]) -> Any:
    def value(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            return namespace.get(node.attr)
        if isinstance(node, ast.Name) and node.id in let:
            return value(ast.parse(let[node.id], mode="eval").body)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return [value(item) for item in node.elts]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return not value(node.operand)
        if isinstance(node, ast.BoolOp):
            result = value(node.values[0])
            for item in node.values[1:]:
                if isinstance(node.op, ast.And) and not result:
                    return result
                if isinstance(node.op, ast.Or) and result:
                    return result
                result = value(item)
            return result
        if isinstance(node, ast.Compare):
            left = value(node.left)
            for op, right_node in zip(node.ops, node.comparators, strict=True):
                right = value(right_node)
                if not _COMPARE[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return _BINARY[type(node.op)](value(node.left), value(node.right))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "len"
            and len(node.args) == 1
        ):
            # SGLang turns an unset --lora-paths into [] before these checks.
            items = value(node.args[0])
            return 0 if items is None else len(items)
        raise ValueError(f"cannot evaluate {ast.unparse(node)!r} in {text!r}")

    return value(ast.parse(text, mode="eval").body)


def problems(command: ServerCommand, data: dict[str, Any] | None = None) -> list[str]:
    server = (data or vendored())["servers"][command.server]
    values, errors = parse(server, command.argv)
    namespace = {**defaults(server), **values}
    for check in server["checks"]:
        let = check["let"]
        guarded = all(evaluate(guard, namespace, let) for guard in check["when"])
        if guarded and not evaluate(check["holds"], namespace, let):
            errors.append(f"start-up assertion fails ({check['source']}): {check['holds']}")
    return errors
