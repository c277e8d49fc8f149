"""The sandbox image as a sandboxed command sees it: the toolchains the sandboxed
repositories need (python and python3 with pip and venv, Node.js with npm, Go with
gotestsum, Rust with cargo, git, a C toolchain), and Python's byte-code for what python
imports: the root file system is read-only, so without it every python start compiles
the standard library again (deploy/sandbox/build-image.sh)."""

from __future__ import annotations

from pathlib import Path

import pytest

from worker.sandbox import open_sandbox
from worker.settings import SandboxSettings

pytestmark = pytest.mark.integration

TOOLS = (
    "python",
    "python3",
    "pip",
    "node",
    "npm",
    "npx",
    "go",
    "gotestsum",
    "cargo",
    "rustc",
    "git",
    "make",
    "gcc",
    "g++",
)
# Every module under /usr/lib that importing pytest loads (with the standard library's
# own), whose byte-code is not in the image.
UNCOMPILED = """\
import importlib.util, os, sys
import json, unittest, email.parser, pytest
print(sorted(
    m.__name__ for m in list(sys.modules.values())
    if (getattr(m, "__file__", None) or "").startswith("/usr/lib/")
    and m.__file__.endswith(".py")
    and not os.path.exists(importlib.util.cache_from_source(m.__file__))
))
"""


def test_image_carries_the_toolchains_and_npm_runs(
    docker_settings: SandboxSettings, source_repo: Path
) -> None:
    with open_sandbox(docker_settings, source_repo) as sb:
        missing = 'for t in "$@"; do command -v "$t" >/dev/null || echo "$t"; done'
        found = sb.exec(["bash", "-c", missing, "-", *TOOLS], timeout=60)
        assert found.exit_code == 0 and found.stdout.split() == [], found.stdout + found.stderr
        npm = sb.exec(["npm", "--version"], timeout=60)
        assert npm.exit_code == 0 and npm.stdout.startswith("10."), npm.stdout + npm.stderr
        venv = sb.exec(["python", "-m", "venv", "--without-pip", "/tmp/venv"], timeout=60)
        assert venv.exit_code == 0, venv.stderr


def test_python_finds_the_byte_code_of_what_it_imports(
    docker_settings: SandboxSettings, source_repo: Path
) -> None:
    with open_sandbox(docker_settings, source_repo) as sb:
        r = sb.exec(["python3", "-c", UNCOMPILED], timeout=60)
    assert r.exit_code == 0, r.stderr
    assert r.stdout.strip() == "[]", r.stdout
