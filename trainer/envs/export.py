"""Environments in the record shapes that larger RL stacks read.

- ``ribbit``: every field (what ``ribbit envs import`` reads back).
- ``swebench``: SWE-bench's instance fields only, for its harness.
- ``skyrl``: the record SkyRL's Mini-SWE-Agent example trains on
  (``examples/train/mini_swe_agent`` in NovaSky-AI/SkyRL): ``prompt`` (chat
  messages), ``env_class``, ``data_source`` and ``instance``, a SWE-bench
  instance plus ``image_name`` (a container with the repository at its base
  commit in ``/testbed``, see :func:`build_testbed_image`) and ``eval_script``.
  SkyRL applies the model's patch with ``git apply`` in ``/testbed``, runs
  ``bash`` on ``eval_script`` and counts the instance resolved iff it exits 0.
- ``verl``: verl's RL dataset row (``data_source``, ``prompt``, ``ability``,
  ``reward_model: {style, ground_truth}``, ``extra_info``, ``agent_name``); the
  ground truth carries what a reward function needs to grade a patch, and
  ``extra_info.eval_script`` the same script as SkyRL's.

Both frameworks load ``.json``/``.jsonl`` files with ``datasets.load_dataset("json")``,
so the export is JSON lines and needs no parquet writer here.

The eval script is the reward of :mod:`trainer.rl.reward` without the gates: put
the environment's test files back (so a patch cannot pass by editing tests),
run the tests with a JUnit report (asked for through ``PYTEST_ADDOPTS``, as
:mod:`worker.gates.testrun` does), and check every FAIL_TO_PASS and PASS_TO_PASS
test passed. The JUnit reader is :mod:`worker.gates.junit`'s own source, embedded,
so test ids mean the same thing in both places.
"""

from __future__ import annotations

import hashlib
import inspect
import io
import json
import re
import shlex
import tarfile
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from trainer.envs.patches import split_by_file
from trainer.envs.schema import Environment
from worker.gates import junit
from worker.gates.testrun import pytest_env

if TYPE_CHECKING:
    import docker

TESTBED = "/testbed"
FORMATS = ("ribbit", "swebench", "skyrl", "verl")
DATA_SOURCE = "ribbit"
# Exit codes of the eval script besides 0 (resolved) and 1 (tests did not pass).
EXIT_SETUP_FAILED = 3
EXIT_TEST_PATCH_FAILED = 4
EXIT_NO_REPORT = 5
EXIT_TIMEOUT = 6
EXIT_TAMPER = 7

_CHECK = """
import json, sys
with open(sys.argv[1], encoding="utf-8", errors="replace") as fh:
    report = fh.read()
try:
    results = outcomes(parse_junit(report, local_files(".")))
except JUnitError as exc:
    print(f"ribbit-eval: {exc}")
    sys.exit(EXIT_NO_REPORT)
required = json.loads(sys.argv[2])
failed = [t for t in required if results.get(t) != "passed"]
for t in failed:
    print(f"ribbit-eval: not passed: {t} ({results.get(t, 'missing')})")
print(f"ribbit-eval: {len(required) - len(failed)}/{len(required)} required tests passed")
sys.exit(1 if failed else 0)
"""


def _delimiter(*bodies: str) -> str:
    """A heredoc terminator that occurs in none of ``bodies`` as a line."""
    seed = hashlib.sha256("\0".join(bodies).encode()).hexdigest()
    for i in range(1000):
        word = f"RIBBIT_EOF_{seed[:12]}_{i}"
        if not any(word in body for body in bodies):
            return word
    raise ValueError("could not find a heredoc delimiter")  # pragma: no cover


def eval_script(env: Environment, *, workdir: str = TESTBED) -> str:
    """A bash script, run in a checkout at ``env.base_commit`` after the candidate patch
    was applied, that exits 0 iff every FAIL_TO_PASS and PASS_TO_PASS test passes."""
    q = shlex.quote
    base = q(env.base_commit)
    lines = [
        "#!/bin/bash",
        f"# Ribbit environment {env.instance_id}: exit 0 iff every FAIL_TO_PASS and"
        " PASS_TO_PASS test passes.",
        "set -uo pipefail",
        f"cd {q(workdir)} || exit {EXIT_SETUP_FAILED}",
        # Exported: the test command runs in a child shell (under timeout).
        'export RIBBIT_JUNIT=$(mktemp "${TMPDIR:-/tmp}/ribbit-junit.XXXXXX")',
        "trap 'rm -f \"$RIBBIT_JUNIT\"' EXIT",
        "# Whatever the patch did to the environment's test files is undone first.",
    ]
    for section in split_by_file(env.test_patch):
        path = q(section.path)
        lines.append(
            f"if git cat-file -e {base}:{path} 2>/dev/null; then "
            f"git checkout -q {base} -- {path}; else rm -f -- {path}; fi"
        )
    if env.test_patch.strip():
        word = _delimiter(env.test_patch)
        patch = env.test_patch if env.test_patch.endswith("\n") else env.test_patch + "\n"
        lines += [
            f"git apply --whitespace=nowarn - <<'{word}' || exit {EXIT_TEST_PATCH_FAILED}",
            patch + word,
        ]
    for command in env.setup_commands:
        # Setup commands come from the environment (an admin's, like CI config).
        lines.append(f"{{ {command} ; }} || exit {EXIT_SETUP_FAILED}")
    # The same options the test runner gives pytest, with the report path filled in
    # at run time; the command itself is the repository's, unchanged (make test...).
    for key, value in pytest_env("@RIBBIT_JUNIT@").items():
        quoted = q(value).replace("@RIBBIT_JUNIT@", "'\"$RIBBIT_JUNIT\"'")
        lines.append(f"export {key}={quoted}")
    tests = env.test_command
    # A hanging test suite must end the evaluation, not the framework's patience.
    lines += [
        f"timeout --kill-after=10 {max(int(env.test_timeout_s), 1)} bash -c {q(tests)}",
        "rc=$?",
        f'if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then echo "ribbit-eval: tests timed out";'
        f" exit {EXIT_TIMEOUT}; fi",
    ]
    checker = inspect.getsource(junit) + f"\nEXIT_NO_REPORT = {EXIT_NO_REPORT}\n" + _CHECK
    word = _delimiter(checker)
    required = json.dumps([*env.FAIL_TO_PASS, *env.PASS_TO_PASS])
    lines += [
        f"python3 - \"$RIBBIT_JUNIT\" {q(required)} <<'{word}'",
        checker.rstrip("\n") + "\n" + word,
        "",
    ]
    return "\n".join(lines)


def image_name_for(env: Environment, *, prefix: str = "ribbit-env") -> str:
    """A valid, lower-case image reference for ``env``'s testbed image."""
    slug = re.sub(r"[^a-z0-9._-]+", "-", env.instance_id.lower()).strip(".-_") or "env"
    return f"{prefix}/{slug[:120]}:{env.base_commit[:12].lower()}"


def _prompt(env: Environment) -> list[dict[str, str]]:
    return [{"role": "user", "content": env.problem_statement}]


def skyrl_record(env: Environment, *, image_name: str | None = None) -> dict[str, Any]:
    instance = env.to_swebench()
    instance["image_name"] = image_name or image_name_for(env)
    instance["eval_script"] = eval_script(env)
    return {
        "data_source": DATA_SOURCE,
        "prompt": _prompt(env),
        "env_class": "null",
        "instance": instance,
    }


def verl_record(env: Environment, *, image_name: str | None = None) -> dict[str, Any]:
    ground_truth = {
        "base_commit": env.base_commit,
        "FAIL_TO_PASS": env.FAIL_TO_PASS,
        "PASS_TO_PASS": env.PASS_TO_PASS,
        "test_patch": env.test_patch,
        "test_command": env.test_command,
    }
    return {
        "data_source": DATA_SOURCE,
        "agent_name": "tool_agent",
        "prompt": _prompt(env),
        "ability": "coding",
        # verl hands ground_truth to the reward function as-is; a JSON string keeps
        # the column one type across rows in the dataset's Arrow table.
        "reward_model": {"style": "rule", "ground_truth": json.dumps(ground_truth)},
        "extra_info": {
            "instance_id": env.instance_id,
            "repo": env.repo,
            "split": env.split,
            "image_name": image_name or image_name_for(env),
            "eval_script": eval_script(env),
        },
    }


RECORDS: dict[str, Callable[[Environment], dict[str, Any]]] = {
    "ribbit": lambda env: env.model_dump(mode="json"),
    "swebench": Environment.to_swebench,
    "skyrl": skyrl_record,
    "verl": verl_record,
}


def export_records(envs: Iterable[Environment], path: Path, fmt: str = "ribbit") -> int:
    """Write one record per line in ``fmt``; returns how many were written."""
    if fmt not in RECORDS:
        raise ValueError(f"format must be one of {FORMATS}; got {fmt!r}")
    make = RECORDS[fmt]
    n = 0
    with path.open("w", encoding="utf-8") as fh:
        for env in envs:
            fh.write(json.dumps(make(env), ensure_ascii=False) + "\n")
            n += 1
    return n


# -- testbed images -----------------------------------------------------------------------
def containerfile_for(env: Environment, base_image: str) -> str:
    lines = [
        f"FROM {base_image}",
        f"LABEL org.ribbit.environment={json.dumps(env.instance_id)}",
        "USER root",
        f"COPY testbed {TESTBED}",
        # The sandbox image's user (uid 1000) runs the agent and the eval script.
        f"RUN chown -R 1000:1000 {TESTBED}",
        "USER 1000",
        f"WORKDIR {TESTBED}",
        f"RUN git config --global --add safe.directory {TESTBED}",
    ]
    lines += [f"RUN {command}" for command in env.setup_commands]
    return "\n".join(lines) + "\n"


def _context_tar(env: Environment, checkout: Path, base_image: str) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        data = containerfile_for(env, base_image).encode()
        info = tarfile.TarInfo("Containerfile")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        tar.add(checkout, arcname="testbed")
    buf.seek(0)
    return buf


class Checkouts(Protocol):
    """Where an environment's repository comes from (trainer/envs/folders.py's
    EnvironmentFolders): named by shape, so the folders may use this module and this
    module never the folders."""

    def checkout(self, env: Environment, dest: Path) -> Path: ...


def build_testbed_image(
    env: Environment,
    store: Checkouts,
    client: docker.DockerClient,
    *,
    base_image: str,
    tag: str | None = None,
) -> str:
    """Build an image holding ``env``'s repository at its base commit in ``/testbed``
    (from the store's bundle), on ``base_image`` (Ribbit's sandbox image by default),
    with the environment's setup commands run. Returns the image reference."""
    tag = tag or image_name_for(env)
    with tempfile.TemporaryDirectory(prefix="ribbit-testbed-") as tmp:
        checkout = store.checkout(env, Path(tmp) / "testbed")
        context = _context_tar(env, checkout, base_image)
        client.images.build(
            fileobj=context,
            custom_context=True,
            dockerfile="Containerfile",
            tag=tag,
            rm=True,
            pull=False,
        )
    return tag
