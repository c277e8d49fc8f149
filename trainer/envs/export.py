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
the environment's test files back (so a patch cannot pass by editing tests), run the
tests and check every FAIL_TO_PASS and PASS_TO_PASS test passed. A plain pytest
command (``pytest ...``, ``python[3] -m pytest ...``) runs watched exactly as the
gates run it (:mod:`worker.gates.watch`): its interpreter under ``-P`` with Ribbit's
bootstrap first, the report and exit status sent over a keyed channel on a pipe only
the script's own Python reads, no report path in any environment variable or argument
the tests can read; a channel that does not vouch for the run, or a tamper event the
patch caused, is tamper. Any other command (``make test``, ``go test``, ``cargo test``,
``npm test``: the watch plan cannot hold it) runs as before, unwatched: its JUnit report
is asked for through ``PYTEST_ADDOPTS`` at a path in ``$RIBBIT_JUNIT`` (as
:mod:`worker.gates.testrun` does for unwatched runs) and read after the run, so code
under test can rewrite it. The Python that runs and judges the tests is
:mod:`trainer.envs.evalcheck`'s, assembled from the gate modules' own source.

Exit codes: 0 resolved; 1 some required test did not pass; 3 setup failed (or the test
interpreter cannot run the bootstrap: it needs Python 3.11+ with pytest); 4 the test
patch did not apply; 5 no readable report; 6 the tests timed out; 7 tamper (a watched
run only).
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import shlex
import tarfile
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from trainer.envs.evalcheck import (
    EXIT_NO_REPORT as EXIT_NO_REPORT,
)
from trainer.envs.evalcheck import (
    EXIT_SETUP_FAILED,
    EXIT_TEST_PATCH_FAILED,
    EXIT_TIMEOUT,
    report_program,
    watched_program,
)
from trainer.envs.evalcheck import (
    EXIT_TAMPER as EXIT_TAMPER,
)
from trainer.envs.patches import split_by_file
from trainer.envs.schema import Environment
from worker.gates.testrun import pytest_env
from worker.gates.watch import WatchPlan, watch_plan

if TYPE_CHECKING:
    import docker

TESTBED = "/testbed"
FORMATS = ("ribbit", "swebench", "skyrl", "verl")
DATA_SOURCE = "ribbit"


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
    plan = watch_plan(env.test_command)
    lines += _plain_run(env) if plan is None else _watched_run(env, plan)
    return "\n".join(lines)


def _plain_run(env: Environment) -> list[str]:
    """An unwatched run: the report at a path the environment names, read afterwards."""
    q = shlex.quote
    lines = [
        # Exported: the test command runs in a child shell (under timeout).
        'export RIBBIT_JUNIT=$(mktemp "${TMPDIR:-/tmp}/ribbit-junit.XXXXXX")',
        "trap 'rm -f \"$RIBBIT_JUNIT\"' EXIT",
    ]
    # The same options the test runner gives pytest, with the report path filled in
    # at run time; the command itself is the repository's, unchanged (make test...).
    for key, value in pytest_env("@RIBBIT_JUNIT@").items():
        quoted = q(value).replace("@RIBBIT_JUNIT@", "'\"$RIBBIT_JUNIT\"'")
        lines.append(f"export {key}={quoted}")
    # A hanging test suite must end the evaluation, not the framework's patience.
    lines += [
        f"timeout --kill-after=10 {_limit(env)} bash -c {q(env.test_command)}",
        "rc=$?",
        f'if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then echo "ribbit-eval: tests timed out";'
        f" exit {EXIT_TIMEOUT}; fi",
    ]
    return lines + _python(report_program(), '"$RIBBIT_JUNIT"', _required(env))


def _watched_run(env: Environment, plan: WatchPlan) -> list[str]:
    """A plain pytest command, run and judged by the watched program (the time limit is
    its own, so that it alone knows the channel)."""
    q = shlex.quote
    args = [_required(env), q(env.base_commit), str(_limit(env))]
    return _python(watched_program(plan), *args)


def _limit(env: Environment) -> int:
    return max(int(env.test_timeout_s), 1)


def _required(env: Environment) -> str:
    return shlex.quote(json.dumps([*env.FAIL_TO_PASS, *env.PASS_TO_PASS]))


def _python(program: str, *args: str) -> list[str]:
    """``program`` run by python3 from a heredoc (read whole before it runs), its exit
    status the script's."""
    word = _delimiter(program)
    return [f"python3 - {' '.join(args)} <<'{word}'", program.rstrip("\n") + "\n" + word, ""]


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
