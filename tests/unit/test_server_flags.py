"""Every inference-server command line the deploy files ship starts on its pinned server.

Checked offline against deploy/server-flags.json, which scripts/server-flags.py extracts
from the pinned vLLM and SGLang wheels (flags, defaults, the LoRA start-up assertions).
"""

from __future__ import annotations

import re

import pytest

from tests.server_flags import (
    DEPLOY,
    ServerCommand,
    compose_commands,
    helm_commands,
    problems,
    vendored,
)

COMMANDS = compose_commands() + helm_commands()


def test_every_profile_and_overlay_is_checked() -> None:
    where = {command.where for command in COMMANDS}
    assert "compose.yaml services.vllm" in where
    assert "compose.yaml services.sglang" in where
    assert {command.server for command in helm_commands()} == {"vllm", "sglang"}
    assert len(helm_commands()) == 1 + len(list((DEPLOY / "helm" / "ribbit").glob("values-*.yaml")))


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: command.where)
def test_server_command_line_starts_clean(command: ServerCommand) -> None:
    assert problems(command) == []


def test_vendored_flags_name_the_pinned_wheels() -> None:
    servers = vendored()["servers"]
    images = (DEPLOY / "compose.yaml").read_text() + "".join(
        path.read_text() for path in (DEPLOY / "helm" / "ribbit").glob("values*.yaml")
    )
    for name, tag_re in (("vllm", r"vllm-openai:v([\d.]+)"), ("sglang", r"sglang:v([\d.]+)")):
        tags = set(re.findall(tag_re, images))
        assert tags == {servers[name]["version"]}, (name, tags)
        assert re.fullmatch(r"[0-9a-f]{64}", servers[name]["sha256"])
        assert servers[name]["wheel"].startswith(f"{name}-{servers[name]['version']}-")
        assert servers[name]["checks"], name


def _sglang(*args: str) -> ServerCommand:
    return ServerCommand("test", "sglang", ("--model-path=/m", *args))


def _vllm(*args: str) -> ServerCommand:
    return ServerCommand("test", "vllm", ("/m", *args))


LORA = ("--enable-lora", "--max-lora-rank=64", "--lora-target-modules=all")


def test_the_shipped_sglang_lora_flags_before_the_fix_fail() -> None:
    found = problems(_sglang(*LORA, "--max-loaded-loras=4"))
    assert len(found) == 1
    assert "max_loaded_loras >= self.max_loras_per_batch" in found[0]
    assert problems(_sglang(*LORA, "--max-loaded-loras=4", "--max-loras-per-batch=4")) == []
    assert problems(_sglang(*LORA, "--max-loaded-loras=8")) == []


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (_sglang("--no-such-flag"), "unrecognized argument --no-such-flag"),
        (_sglang("--enable-lora=yes"), "--enable-lora takes no value"),
        (_sglang("--context-length=lots"), "is not int"),
        (_sglang("extra"), "unrecognized argument 'extra'"),
        (_sglang("--enable-lora", "--max-lora-rank=64"), "lora_target_modules"),
        (_sglang(*LORA, "--enable-lora-overlap-loading"), "max_loaded_loras_limit"),
        (_sglang(*LORA, "--max-loaded-loras=40", "--enable-lora-overlap-loading"), "limit"),
        (_sglang(*LORA, "--max-lora-chunk-size=48"), "not one of"),
        (_vllm("--max-loaded-loras=4"), "unrecognized argument --max-loaded-loras"),
        (_vllm("--enable-lora", "--max-lora-rank=48"), "not one of"),
        (_vllm("--enable-lora", "--max-loras=4", "--max-cpu-loras=2"), "max_cpu_loras"),
        (_vllm("/other"), "unrecognized argument '/other'"),
    ],
)
def test_a_bad_command_line_is_refused(command: ServerCommand, expected: str) -> None:
    assert any(expected in problem for problem in problems(command)), problems(command)


def test_checks_apply_only_with_lora_enabled() -> None:
    assert problems(_sglang("--max-loaded-loras=4")) == []
    assert problems(_vllm("--max-loras=4", "--max-cpu-loras=2")) == []
    assert problems(_vllm("--no-enable-lora", "--max-loras=4", "--max-cpu-loras=2")) == []
