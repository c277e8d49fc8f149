#!/usr/bin/env python3
"""Vendor the pinned inference servers' command-line flags and LoRA start-up checks.

    python3 scripts/server-flags.py            # writes deploy/server-flags.json

Downloads the vLLM and SGLang wheels the deploy files pin (`pip download --no-deps`, into
/tmp/ribbit-server-wheels, kept between runs: vLLM's wheel is about 315 MB), reads their
argument definitions with `ast` (nothing of either package is imported or run) and writes
every flag with its destination, kind, type, default and literal choices, plus the LoRA
assertions each server makes at start-up, each with its guards, source line and the
wheel's sha256. tests/unit/test_server_flags.py checks every Compose profile and Helm
overlay against that file in CI, offline; rerun this script when a pin moves.

Where each server defines its flags (the pinned versions):
- vLLM 0.28.0: `vllm/entrypoints/openai/cli_args.py` (`make_arg_parser`'s own arguments,
  then one `--field-name` per field of `BaseFrontendArgs` / `FrontendArgs`) and
  `vllm/engine/arg_utils.py` (`EngineArgs.add_cli_args`: literal `add_argument` names;
  a field typed bool becomes `--x` / `--no-x`, BooleanOptionalAction). LoRA checks:
  `LoRAConfig._validate_lora_config` in `vllm/config/lora.py`, built only when
  `--enable-lora` is set; `--max-lora-rank` takes only `MaxLoRARanks`.
- SGLang 0.5.18: `ServerArgs` in `sglang/srt/server_args.py`, fields annotated
  `A[T, "help" | Arg(...)]` become `--field-name` (or `Arg.cli_name`, plus aliases; bool
  is store_true), and `add_cli_args` adds a few by hand. LoRA checks:
  `ServerArgs.check_lora_server_args`.
"""

from __future__ import annotations

import ast
import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "deploy" / "server-flags.json"
# A fixed cache, so a rerun does not fetch 340 MB again; only this script writes it.
WHEELS = Path("/tmp/ribbit-server-wheels")  # noqa: S108
PINS = {"vllm": "0.28.0", "sglang": "0.5.18"}


def wheel(package: str, version: str) -> Path:
    found = sorted(WHEELS.glob(f"{package}-{version}-*.whl"))
    if not found:
        WHEELS.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q",
             f"{package}=={version}", "-d", str(WHEELS)],
            check=True,
        )  # fmt: skip
        found = sorted(WHEELS.glob(f"{package}-{version}-*.whl"))
    return found[0]


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def parse(archive: zipfile.ZipFile, name: str) -> ast.Module:
    return ast.parse(archive.read(name).decode(), filename=name)


def find_class(module: ast.Module, name: str) -> ast.ClassDef:
    for node in ast.walk(module):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise LookupError(name)


def find_function(scope: ast.AST, name: str) -> ast.FunctionDef:
    for node in ast.walk(scope):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise LookupError(name)


def literal(node: ast.AST | None) -> Any:
    """The node's value when it is a literal (JSON-able), else its source text."""
    if node is None:
        return None
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return {"source": ast.unparse(node)}
    if isinstance(value, (set, tuple)):
        return list(value)
    return value


def kind_of(annotation: str) -> tuple[str, str]:
    """(kind, type) from an annotation's text: switch, list or value; int, float, bool, str."""
    text = annotation.replace(" ", "")
    if text in {"bool", "Optional[bool]", "bool|None"}:
        return "switch", "bool"
    if "list[" in text.lower() or "set[" in text:
        return "list", "str"
    for name in ("int", "float"):
        if text in {name, f"Optional[{name}]", f"{name}|None"}:
            return "value", name
    return "value", "str"


def fields(cls: ast.ClassDef) -> dict[str, ast.AnnAssign]:
    return {
        node.target.id: node
        for node in cls.body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
    }


def checks(function: ast.FunctionDef, source: str, guards: list[str]) -> list[dict[str, Any]]:
    """Every `assert` and every `if COND: raise` in the function, with the `if` guards
    that lead to it (an `else` branch adds `not (test)`); loops are not entered."""
    found: list[dict[str, Any]] = []
    let: dict[str, str] = {}

    def walk(body: list[ast.stmt], guard: list[str]) -> None:
        for node in body:
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
            ):
                let[node.targets[0].id] = ast.unparse(node.value)
            elif isinstance(node, ast.Assert):
                found.append(
                    {
                        "source": f"{source}:{node.lineno}",
                        "when": guard,
                        "let": dict(let),
                        "holds": ast.unparse(node.test),
                        "message": literal(node.msg) if node.msg is not None else None,
                    }
                )
            elif isinstance(node, ast.If):
                test = ast.unparse(node.test)
                if len(node.body) == 1 and isinstance(node.body[0], ast.Raise):
                    raised = node.body[0].exc
                    message = None
                    if isinstance(raised, ast.Call) and raised.args:
                        message = ast.unparse(raised.args[0])
                    found.append(
                        {
                            "source": f"{source}:{node.lineno}",
                            "when": guard,
                            "let": dict(let),
                            "holds": f"not ({test})",
                            "message": message,
                        }
                    )
                else:
                    walk(node.body, [*guard, test])
                walk(node.orelse, [*guard, f"not ({test})"])

    walk(function.body, guards)
    return found


def split_on_environment(found: list[dict[str, Any]]) -> tuple[list[Any], list[Any]]:
    """Checks that read only the flags (`self.*`, `len`, their own locals) apart from those
    that read the machine (`envs.*`, `current_platform`): only the first can be decided
    from a command line."""
    decided: list[Any] = []
    machine: list[Any] = []
    for check in found:
        names = set()
        for text in [*check["when"], *check["let"].values(), check["holds"]]:
            names |= {
                node.id
                for node in ast.walk(ast.parse(text, mode="eval"))
                if isinstance(node, ast.Name)
            }
        free = names - {"self", "len", "None", "True", "False"} - set(check["let"])
        (machine if free else decided).append(check)
    return decided, machine


def add_argument_names(scope: ast.AST) -> list[tuple[list[str], ast.Call]]:
    calls = []
    for node in ast.walk(scope):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
        ):
            names = [
                arg.value
                for arg in node.args
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
            ]
            calls.append((names, node))
    return calls


def keyword(call: ast.Call, name: str) -> ast.AST | None:
    for item in call.keywords:
        if item.arg == name:
            return item.value
    return None


def explicit(names: list[str], call: ast.Call, flags: dict[str, Any]) -> None:
    """A hand-written add_argument: its action and type as written."""
    options = [name for name in names if name.startswith("-")]
    if not options:
        return
    dest_node = keyword(call, "dest")
    dest = literal(dest_node) if dest_node is not None else options[0].lstrip("-")
    dest = dest.replace("-", "_") if isinstance(dest, str) else options[0]
    action = keyword(call, "action")
    action_text = ast.unparse(action) if action is not None else ""
    nargs = literal(keyword(call, "nargs"))
    kind, type_ = "value", "str"
    if "store_true" in action_text or "BooleanOptionalAction" in action_text:
        kind, type_ = "switch", "bool"
    elif nargs in ("*", "+"):
        kind = "list"
    type_node = keyword(call, "type")
    if type_node is not None and ast.unparse(type_node) in {"int", "float"}:
        type_ = ast.unparse(type_node)
    for option in options:
        flags[option] = {
            "dest": dest,
            "kind": kind,
            "type": type_,
            "default": literal(keyword(call, "default")),
            "choices": literal(keyword(call, "choices")),
        }
    if "BooleanOptionalAction" in action_text:
        for option in options:
            if option.startswith("--"):
                flags["--no-" + option[2:]] = {**flags[option], "negates": True}


def vllm(path: Path) -> dict[str, Any]:
    with zipfile.ZipFile(path) as archive:
        cli = parse(archive, "vllm/entrypoints/openai/cli_args.py")
        engine = parse(archive, "vllm/engine/arg_utils.py")
        lora = parse(archive, "vllm/config/lora.py")
    flags: dict[str, Any] = {}
    engine_fields = fields(find_class(engine, "EngineArgs"))
    lora_fields = fields(find_class(lora, "LoRAConfig"))
    rank_choices: Any = None
    for node in lora.body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "MaxLoRARanks":
            rank_choices = [literal(item) for item in node.value.slice.elts]  # type: ignore[attr-defined]
    for names, call in add_argument_names(find_function(cli, "make_arg_parser")):
        explicit(names, call, flags)
    for cls in ("BaseFrontendArgs", "FrontendArgs"):
        for name, node in fields(find_class(cli, cls)).items():
            vllm_field(flags, "--" + name.replace("_", "-"), name, node, rank_choices)
    for names, call in add_argument_names(find_function(engine, "add_cli_args")):
        options = [name for name in names if name.startswith("-")]
        spread = [item.value for item in call.keywords if item.arg is None]
        if not options:
            continue
        if not spread:
            explicit(names, call, flags)
            continue
        dest = options[0].lstrip("-").replace("-", "_")
        field = engine_fields.get(dest)
        if field is None:
            explicit(names, call, flags)
            continue
        for option in options:
            vllm_field(flags, option, dest, field, rank_choices, lora_fields)
        action = keyword(call, "action")
        if action is not None and "BooleanOptionalAction" in ast.unparse(action):
            explicit(names, call, flags)
    lora_checks = checks(
        find_function(find_class(lora, "LoRAConfig"), "_validate_lora_config"),
        "vllm/config/lora.py",
        ["self.enable_lora"],
    )
    decided, machine = split_on_environment(lora_checks)
    return {
        "positional": ["model_tag"],
        "flags": dict(sorted(flags.items())),
        "checks": decided,
        "machine_checks": machine,
    }


def vllm_field(
    flags: dict[str, Any],
    option: str,
    dest: str,
    node: ast.AnnAssign,
    rank_choices: Any,
    lora_fields: dict[str, ast.AnnAssign] | None = None,
) -> None:
    annotation = ast.unparse(node.annotation)
    kind, type_ = kind_of(annotation)
    if annotation == "MaxLoRARanks":
        kind, type_ = "value", "int"
    default = literal(node.value)
    # `max_loras: int = LoRAConfig.max_loras`: the default is LoRAConfig's.
    if isinstance(default, dict) and lora_fields is not None:
        owner, _, attr = default["source"].partition(".")
        if owner == "LoRAConfig" and attr in lora_fields:
            value: ast.AST | None = lora_fields[attr].value
            if isinstance(value, ast.Call) and ast.unparse(value.func) == "Field":
                value = keyword(value, "default")
            default = literal(value)
    choices = rank_choices if annotation == "MaxLoRARanks" else None
    if annotation.startswith("Literal["):
        choices = literal(node.annotation.slice)  # type: ignore[attr-defined]
    if type_ == "bool" and "str" in annotation:
        kind = "optional-value"
    flags[option] = {
        "dest": dest,
        "kind": kind,
        "type": type_,
        "default": default,
        "choices": choices,
    }
    if kind == "switch" and option.startswith("--"):
        flags["--no-" + option[2:]] = {**flags[option], "negates": True}


def sglang(path: Path) -> dict[str, Any]:
    with zipfile.ZipFile(path) as archive:
        module = parse(archive, "sglang/srt/server_args.py")
    server_args = find_class(module, "ServerArgs")
    flags: dict[str, Any] = {}
    for name, node in fields(server_args).items():
        sglang_field(flags, name, node)
    for names, call in add_argument_names(find_function(server_args, "add_cli_args")):
        explicit(names, call, flags)
    lora_checks = checks(
        find_function(server_args, "check_lora_server_args"),
        "sglang/srt/server_args.py",
        [],
    )
    decided, machine = split_on_environment(lora_checks)
    return {
        "positional": [],
        "flags": dict(sorted(flags.items())),
        "checks": decided,
        "machine_checks": machine,
    }


def sglang_field(flags: dict[str, Any], name: str, node: ast.AnnAssign) -> None:
    annotation = node.annotation
    if not (isinstance(annotation, ast.Subscript) and ast.unparse(annotation.value) == "A"):
        return
    parts = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else []
    if len(parts) < 2:
        return
    inner, meta = parts[0], parts[1]
    arg: dict[str, ast.AST] = {}
    if isinstance(meta, ast.Call) and ast.unparse(meta.func) == "Arg":
        arg = {item.arg: item.value for item in meta.keywords if item.arg}
    elif not isinstance(meta, ast.JoinedStr) and not (
        isinstance(meta, ast.Constant) and isinstance(meta.value, str)
    ):
        return
    if "no_cli" in arg and literal(arg["no_cli"]) is True:
        return
    cli_name = literal(arg["cli_name"]) if "cli_name" in arg else "--" + name.replace("_", "-")
    aliases = literal(arg["aliases"]) if "aliases" in arg else []
    kind, type_ = kind_of(ast.unparse(inner))
    action = ast.unparse(arg["action"]) if "action" in arg else ""
    if "action" in arg:
        kind = "switch" if "BooleanOptionalAction" in action or "store_true" in action else "value"
        kwargs = literal(arg.get("action_kwargs"))
        if isinstance(kwargs, dict) and kwargs.get("nargs") in ("*", "+"):
            kind = "list"
    elif "nargs" in arg and literal(arg["nargs"]) in ("*", "+"):
        kind = "list"
    inner_text = ast.unparse(inner)
    if "int" in inner_text and kind == "value" and "str" not in inner_text:
        type_ = "int"
    choices = literal(arg["choices"]) if "choices" in arg else None
    if isinstance(choices, dict):
        choices = None  # computed at run time (e.g. the registered parsers): not checked
    entry = {
        "dest": name,
        "kind": kind,
        "type": type_,
        "default": literal(node.value),
        "choices": choices,
    }
    for option in [cli_name, *aliases]:
        flags[option] = entry
    if "BooleanOptionalAction" in action:
        flags["--no-" + cli_name[2:]] = {**entry, "negates": True}


def main() -> int:
    servers: dict[str, Any] = {}
    for package, read in (("vllm", vllm), ("sglang", sglang)):
        path = wheel(package, PINS[package])
        servers[package] = {
            "version": PINS[package],
            "wheel": path.name,
            "sha256": sha256(path),
            **read(path),
        }
    document = {
        "generated_by": "scripts/server-flags.py",
        "servers": servers,
    }
    OUT.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    for package, data in servers.items():
        print(
            f"{package} {data['version']}: {len(data['flags'])} flags, {len(data['checks'])} checks"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
