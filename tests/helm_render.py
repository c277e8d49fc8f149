"""The Helm chart in deploy/helm/ribbit, rendered in Python the way Helm renders it.

Helm itself is not installable here (no Debian or PyPI package ships the binary), so
the templates keep to a deliberately small subset of Go templates -- value lookups
(optionally `| quote`), `.Release.Name` and `.Release.Revision`, `if`/`end` around
whole documents, and `toYaml X | nindent N` -- and this module renders exactly that
subset, refusing any other action so the chart cannot drift past what is checked. A few
templates go further: the Secret (generated secrets kept across upgrades), the
ConfigMap (one adapter server per inference replica) and the claims the chart creates
also use variables (`$x := ...`, `$x = ...`), `if` on a pipeline, `range $i := ...` over
a list (inside it only `$` variables: `.` is the element there, as in Helm), comments,
and the few functions in _functions, evaluated as Helm does; `lookup` answers from the
cluster a test passes in. `helm lint`/`helm template` on a machine with Helm remain the
authority (scripts/helm-check.sh).
"""

from __future__ import annotations

import base64
import copy
import json
import random
import re
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[1] / "deploy" / "helm" / "ribbit"
RELEASE = "rb"
REVISION = 3
NAMESPACE = "ribbit"

_ACTION = re.compile(r"({{-?\s*.*?\s*-?}})", re.S)
_LOOKUP = re.compile(
    r"^\.(Values(?:\.[A-Za-z_][\w-]*)+|Release\.Name|Release\.Revision|Chart\.Name|"
    r"Chart\.AppVersion)(\s*\|\s*quote)?$"
)
_TOYAML = re.compile(r"^toYaml\s+\.(Values(?:\.[A-Za-z_][\w-]*)+)\s*\|\s*nindent\s+(\d+)$")
_IF = re.compile(r"^if\s+\.(Values(?:\.[A-Za-z_][\w-]*)+)$")
_ASSIGN = re.compile(r"^\$([A-Za-z_]\w*)\s*:=\s*(.+)$", re.S)
_REASSIGN = re.compile(r"^\$([A-Za-z_]\w*)\s*=\s*(.+)$", re.S)
_RANGE = re.compile(r"^range\s+\$([A-Za-z_]\w*)\s*:=\s*(.+)$", re.S)
_IF_PIPELINE = re.compile(r"^if\s+(.+)$", re.S)
_OPENS_BLOCK = re.compile(r"^(if|range)\s")
_COMMENT = re.compile(r"^/\*.*\*/$", re.S)
_TOKEN = re.compile(r'\s*(\(|\)|\||"(?:[^"\\]|\\.)*"|[^\s()|]+)')


class UnsupportedTemplate(ValueError):
    pass


class ChartFailure(Exception):
    """The chart's own `fail`: Helm stops the install with this message."""


# What `lookup` sees: (apiVersion, kind, namespace, name) -> the object. Empty, as under
# `helm template` or a first install, unless a test passes a cluster in.
Cluster = dict[tuple[str, str, str, str], dict[str, Any]]


def _get(mapping: Any, key: Any) -> Any:
    # sprig's get: "" for a missing key.
    return mapping.get(key, "") if isinstance(mapping, dict) else ""


def _rand_alnum(rng: random.Random) -> Callable[[int], str]:
    alphabet = string.ascii_letters + string.digits
    return lambda n: "".join(rng.choice(alphabet) for _ in range(int(n)))


def _or(*values: Any) -> Any:
    # Go's or: the first true argument, else the last.
    return next((v for v in values if v), values[-1])


def _functions(ctx: dict[str, Any]) -> dict[str, Callable[..., Any]]:
    """The functions the chart may call outside the plain subset, as Helm defines them."""
    cluster: Cluster = ctx["cluster"]

    def fail(message: str) -> None:
        raise ChartFailure(message)

    return {
        "not": lambda v: not v,
        "and": lambda *vs: all(vs),
        "or": _or,
        "hasKey": lambda m, k: isinstance(m, dict) and k in m,
        "get": _get,
        "dict": lambda: {},
        "list": lambda *vs: list(vs),
        "append": lambda items, v: [*items, v],
        "until": lambda n: list(range(n)),
        "int": lambda v: int(v or 0),
        "default": lambda fallback, *v: v[0] if v and v[0] else fallback,
        "printf": lambda fmt, *args: fmt % args,
        "randAlphaNum": _rand_alnum(ctx["rng"]),
        "b64enc": lambda v: base64.b64encode(str(v).encode()).decode(),
        "b64dec": lambda v: base64.b64decode(str(v)).decode(),
        # Go's encoding/json: no spaces between items.
        "toJson": lambda v: json.dumps(v, separators=(",", ":")),
        "quote": lambda v: json.dumps(str(v)),
        "lookup": lambda api, kind, ns, name: copy.deepcopy(cluster.get((api, kind, ns, name), {})),
        "fail": fail,
    }


def _tokens(text: str) -> list[str]:
    tokens, pos = [], 0
    while pos < len(text.rstrip()):
        m = _TOKEN.match(text, pos)
        if not m:
            raise UnsupportedTemplate(f"cannot read {text!r}")
        tokens.append(m.group(1))
        pos = m.end()
    return tokens


def _dot_path(token: str, ctx: dict[str, Any]) -> Any:
    if ctx.get("in_range"):
        raise UnsupportedTemplate(f"{token} inside range, where . is the element: use a $variable")
    node: Any = ctx
    for part in token[1:].split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _evaluate(text: str, ctx: dict[str, Any], variables: dict[str, Any]) -> Any:
    """A Go-template pipeline (`cmd | cmd ...`, each piped value the last argument) over
    _functions, `.Values`/`.Release` paths (a missing map key is nil, as in Helm),
    `$variables`, string and integer literals and parenthesised pipelines."""
    functions = _functions(ctx)
    tokens = _tokens(text)
    pos = 0

    def operand(token: str) -> Any:
        nonlocal pos
        if token == "(":
            value = pipeline()
            if pos >= len(tokens) or tokens[pos] != ")":
                raise UnsupportedTemplate(f"unbalanced parentheses in {text!r}")
            pos += 1
            return value
        if token.startswith('"'):
            return json.loads(token)
        if token in functions:  # a function named as an argument is called with none (dict)
            return functions[token]()
        if token.isdigit():
            return int(token)
        if token.startswith("$"):
            name, _, rest = token[1:].partition(".")
            if name not in variables:
                raise UnsupportedTemplate(f"no variable ${name}")
            node = variables[name]
            for part in rest.split(".") if rest else []:
                node = node.get(part) if isinstance(node, dict) else None
            return node
        if re.fullmatch(r"\.(Values|Release)(\.[A-Za-z_][\w-]*)+", token):
            return _dot_path(token, ctx)
        raise UnsupportedTemplate(f"template action outside the checked subset: {token}")

    def command() -> Any:
        nonlocal pos
        args: list[Any] = []
        name = None
        if tokens[pos] in functions:
            name = tokens[pos]
            pos += 1
        while pos < len(tokens) and tokens[pos] not in ("|", ")"):
            token = tokens[pos]
            pos += 1
            args.append(operand(token))
        return name, args

    def pipeline() -> Any:
        nonlocal pos
        value: Any = None
        first = True
        while True:
            name, args = command()
            if name is None:
                if len(args) != 1 or not first:
                    raise UnsupportedTemplate(f"template action outside the checked subset: {text}")
                value = args[0]
            else:
                try:
                    value = functions[name](*args, *([] if first else [value]))
                except TypeError as exc:  # called with the wrong arguments
                    raise UnsupportedTemplate(f"{name} in {text!r}: {exc}") from None
            first = False
            if pos < len(tokens) and tokens[pos] == "|":
                pos += 1
                continue
            return value

    result = pipeline()
    if pos != len(tokens):
        raise UnsupportedTemplate(f"template action outside the checked subset: {text}")
    return result


def _lookup(path: str, ctx: dict[str, Any]) -> Any:
    if ctx.get("in_range"):
        raise UnsupportedTemplate(f".{path} inside range, where . is the element: use a $variable")
    node: Any = ctx
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            raise UnsupportedTemplate(f"no value .{path}")
        node = node[part]
    return node


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        raise UnsupportedTemplate(f"a map or list printed as a scalar: {value!r}")
    return str(value)


def _action(piece: str) -> tuple[bool, bool, str] | None:
    """(trims left, trims right, body) of a `{{ ... }}` piece; None for plain text."""
    if not piece.startswith("{{"):
        return None
    left, right = piece.startswith("{{-"), piece.endswith("-}}")
    return left, right, piece[3 if left else 2 : -3 if right else -2].strip()


def _block_end(pieces: list[str], start: int) -> int:
    """The index of the `end` that closes the block opened at pieces[start]."""
    depth = 0
    for index in range(start + 1, len(pieces)):
        action = _action(pieces[index])
        if action is None:
            continue
        if _OPENS_BLOCK.match(action[2]):
            depth += 1
        elif action[2] == "end":
            if depth == 0:
                return index
            depth -= 1
    raise UnsupportedTemplate("range without end")


def _pieces(text: str) -> list[str]:
    """Text and `{{ ... }}` pieces, with `{{-` and `-}}` trimming the text beside them as
    Go's lexer does (once, before anything runs: a range's body is trimmed alike in every
    pass)."""
    pieces = _ACTION.split(text)
    for index, piece in enumerate(pieces):
        action = _action(piece)
        if action is None:
            continue
        if action[0] and index > 0:
            pieces[index - 1] = pieces[index - 1].rstrip()
        if action[1] and index + 1 < len(pieces):
            pieces[index + 1] = pieces[index + 1].lstrip()
    return pieces


class _Renderer:
    """One template's output and its variables, shared by a range's body with the text
    around it."""

    def __init__(self, ctx: dict[str, Any]) -> None:
        self.ctx = ctx
        self.variables: dict[str, Any] = {}
        self.out: list[str] = []

    def run(self, pieces: list[str]) -> None:
        active = [True]
        index = 0
        while index < len(pieces):
            piece = pieces[index]
            index += 1
            action = _action(piece)
            if action is None:
                if all(active):
                    self.out.append(piece)
                continue
            body = action[2]
            if body.startswith("range"):
                m = _RANGE.match(body)
                if not m:
                    raise UnsupportedTemplate(f"template action outside the checked subset: {body}")
                if all(active):
                    end = _block_end(pieces, index - 1)
                    self._range(m.group(1), m.group(2), pieces[index:end])
                    index = end  # on to the range's own `end`, which closes this:
                active.append(False)
            elif body == "end":
                if len(active) == 1:
                    raise UnsupportedTemplate("end without if")
                active.pop()
            elif m := _IF.match(body):
                active.append(all(active) and bool(_lookup(m.group(1), self.ctx)))
            elif m := _IF_PIPELINE.match(body):
                active.append(all(active) and bool(self._evaluate(m.group(1))))
            elif all(active):
                self._act(body)
        if len(active) != 1:
            raise UnsupportedTemplate("if without end")

    def _evaluate(self, text: str) -> Any:
        return _evaluate(text, self.ctx, self.variables)

    def _range(self, name: str, over: str, body: list[str]) -> None:
        items = self._evaluate(over)
        if not isinstance(items, list):
            raise UnsupportedTemplate(f"range over {items!r}, not a list")
        outer = self.ctx
        self.ctx = {**outer, "in_range": True}
        try:
            for item in items:
                self.variables[name] = item
                self.run(body)
        finally:
            self.ctx = outer

    def _act(self, body: str) -> None:
        if m := _LOOKUP.match(body):
            value = _scalar(_lookup(m.group(1), self.ctx))
            self.out.append(json.dumps(value) if m.group(2) else value)
        elif m := _TOYAML.match(body):
            dumped = yaml.safe_dump(
                _lookup(m.group(1), self.ctx), default_flow_style=False, sort_keys=False
            ).rstrip("\n")
            pad = " " * int(m.group(2))
            self.out.append("\n" + "\n".join(pad + line for line in dumped.splitlines()))
        elif _COMMENT.match(body):
            return
        elif m := _ASSIGN.match(body):
            self.variables[m.group(1)] = self._evaluate(m.group(2))
        elif m := _REASSIGN.match(body):
            if m.group(1) not in self.variables:
                raise UnsupportedTemplate(f"${m.group(1)} = before ${m.group(1)} :=")
            self.variables[m.group(1)] = self._evaluate(m.group(2))
        else:
            value = self._evaluate(body)
            self.out.append("" if value is None else _scalar(value))


def render(text: str, values: dict[str, Any], cluster: Cluster | None = None, seed: int = 0) -> str:
    """Render the chart's Go-template subset (see the module docstring)."""
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    ctx = {
        "Values": values,
        "Release": {"Name": RELEASE, "Revision": REVISION, "Namespace": NAMESPACE},
        "Chart": {"Name": chart["name"], "AppVersion": chart["appVersion"]},
        "cluster": cluster or {},
        # randAlphaNum, seeded: a test's render is the same every run.
        "rng": random.Random(seed),
    }
    renderer = _Renderer(ctx)
    renderer.run(_pieces(text))
    return "".join(renderer.out)


# The one value an install must give (the chart has no database and no default for it).
DATABASE_URL = "postgresql+psycopg://ribbit:pw@ribbit-postgres/ribbit"


def chart_values(*overlays: str) -> dict[str, Any]:
    """values.yaml, then each overlay file merged in the way Helm does (maps merge key by
    key, null deletes a key; anything else, lists included, is replaced)."""
    data: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text())
    for name in overlays:
        _merge(data, yaml.safe_load((CHART / name).read_text()))
    return data


def default_values(*overlays: str) -> dict[str, Any]:
    """chart_values with the database URL every install gives (`--set-string
    secrets.stringData.ribbit_database_url=...`)."""
    data = chart_values(*overlays)
    data["secrets"]["stringData"]["ribbit_database_url"] = DATABASE_URL
    return data


def _merge(into: dict[str, Any], overlay: dict[str, Any]) -> None:
    for key, value in overlay.items():
        if value is None:
            into.pop(key, None)
        elif isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def manifests(
    values: dict[str, Any], cluster: Cluster | None = None, seed: int = 0
) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for template in sorted((CHART / "templates").glob("*.yaml")):
        rendered = render(template.read_text(), values, cluster, seed)
        try:
            docs += [d for d in yaml.safe_load_all(rendered) if d]
        except yaml.YAMLError as exc:
            raise AssertionError(f"{template.name} renders to invalid YAML:\n{rendered}") from exc
    return docs


def kube_version_floor() -> str:
    """The oldest Kubernetes Chart.yaml's ``kubeVersion`` (``>=X.Y.Z-0``) lets Helm
    install on, as ``X.Y.Z``."""
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    found = re.fullmatch(r">=\s*(\d+\.\d+\.\d+)(?:-0)?", str(chart["kubeVersion"]).strip())
    if found is None:
        raise AssertionError(f"kubeVersion {chart['kubeVersion']!r} is not of the form >=X.Y.Z-0")
    return found.group(1)


def kube_versions() -> tuple[str, str]:
    """The versions a rendered document must be valid at: the floor kubeVersion claims
    (a field newer than it would fail there, so kubeVersion cannot drift below what the
    chart uses) and the newest whose schemas kubernetes-validate ships (no upper bound is
    claimed, so an API removed since must fail too)."""
    import kubernetes_validate

    return kube_version_floor(), str(kubernetes_validate.latest_version())


def validate(doc: dict[str, Any], versions: tuple[str, ...] | None = None) -> None:
    """Kubernetes' OpenAPI schemas (kubernetes-validate, offline, strict: unknown fields
    fail), at each of ``versions`` (kube_versions() where not given)."""
    import kubernetes_validate

    for version in versions or kube_versions():
        kubernetes_validate.validate(doc, version, strict=True)


# CRDs the offline Kubernetes schemas do not include: their fields are checked by hand.
CRD_KINDS = frozenset({"ScaledObject", "ServiceMonitor", "PodMonitor"})


def by_name(docs: list[dict[str, Any]], kind: str, suffix: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(suffix))
