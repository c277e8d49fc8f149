"""Who can fix a failed step, read from its output and the setup proxy's refusals; and the
failure reason (bot/store/failure.py) of a set-up that failed, the same for a solve job
and for ``ribbit gates``.

The maintainer fixes what ``.ribbit.yml`` says; the operator what only the deployment
can change: the CA bundle behind a TLS-inspecting gateway, the hosts repositories may
add, the sandbox image, the set-up's time limit.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from bot.store.failure import FailureReason, Fixer
from worker.sandbox.egress_policy import (
    REPO_HOST_REFUSED,
    BlockedRequest,
    refusal_kind,
    repo_setup_hosts,
)
from worker.sandbox.setup import SetupResult

# What clients print when a gateway re-signs TLS with a CA the sandbox does not trust
# (Python's ssl, OpenSSL, npm, Go, curl).
_TLS_MARKERS = re.compile(
    r"CERTIFICATE_VERIFY_FAILED|self[- ]signed certificate in certificate chain"
    r"|unable to get local issuer certificate|SELF_SIGNED_CERT_IN_CHAIN"
    r"|UNABLE_TO_GET_ISSUER_CERT_LOCALLY|certificate signed by unknown authority",
    re.IGNORECASE,
)
# "bash: line 1: go: command not found", "sh: 1: npm: not found"
_MISSING_TOOL = re.compile(r"(?:^|: )([\w.+-]+): (?:command )?not found\s*$", re.MULTILINE)
_MISSING_MODULE = re.compile(
    r"No module named '?([\w.]+)'?|Cannot find module '([^']+)'|cannot find package \"([^\"]+)\""
)

TLS_FIXER = Fixer(
    "operator",
    "RIBBIT_SANDBOX__SETUP_CA_BUNDLE",
    "a TLS-inspecting gateway re-signs the registries' certificates "
    "(CERTIFICATE_VERIFY_FAILED), so set this to a PEM bundle with the gateway's CA.",
)


def output_fixer(output: str) -> Fixer | None:
    """Who can fix a step whose output is ``output``, where the output itself says."""
    if _TLS_MARKERS.search(output):
        return TLS_FIXER
    tool = _MISSING_TOOL.search(output)
    if tool:
        return Fixer(
            "operator",
            "RIBBIT_SANDBOX__IMAGE",
            f"the sandbox image has no `{tool.group(1)}`: use an image that has it "
            "(or let repositories name one: RIBBIT_SANDBOX__REPO_IMAGES and `.ribbit.yml` "
            "`image`).",
        )
    module = _MISSING_MODULE.search(output)
    if module:
        name = next(g for g in module.groups() if g)
        return Fixer(
            "maintainer",
            "setup",
            f"`{name}` is not installed: install the test dependencies in `setup` "
            "(`pip install -e .[test]`, say).",
        )
    return None


def hosts_fixer(blocked: Sequence[BlockedRequest], permitted: Sequence[str]) -> Fixer | None:
    """Who can let the refused requests through: the maintainer (``setup_hosts``) where
    the deployment lets repositories add the hosts, else the operator."""
    asked = _names(b.host for b in blocked if b.reason == REPO_HOST_REFUSED)
    if asked:
        return Fixer(
            "operator",
            "RIBBIT_SANDBOX__REPO_SETUP_HOSTS",
            f"`.ribbit.yml` `setup_hosts` names {asked}, which this deployment does not let "
            "repositories add: add them here, or take them out of `setup_hosts`.",
        )
    unlisted = [b.host for b in blocked if refusal_kind(b.reason) == "host not on the allow-list"]
    if unlisted:
        names = _names(unlisted)
        if set(repo_setup_hosts(unlisted, permitted).allowed) >= set(unlisted):
            return Fixer(
                "maintainer",
                "setup_hosts",
                f"add {names} to `setup_hosts` (this deployment lets repositories add them).",
            )
        return Fixer(
            "operator",
            "RIBBIT_SANDBOX__REPO_SETUP_HOSTS",
            f"the setup asked for {names}, which is not on the setup network's allow-list: "
            "add it here so the repository may name it in `.ribbit.yml` `setup_hosts` (or "
            "to RIBBIT_SANDBOX__SETUP_ALLOWED_HOSTS for every repository).",
        )
    if blocked:
        first = blocked[0]
        return Fixer(
            "operator",
            "RIBBIT_SANDBOX__SETUP_ALLOWED_HOSTS",
            f"the worker could not reach {_names(b.host for b in blocked)} ({first.reason}): "
            "check the worker's DNS and network, or list a registry mirror it can reach.",
        )
    return None


def setup_failure(
    setup: SetupResult,
    *,
    detected: bool,
    permitted_hosts: Sequence[str],
    stopped: str = "so the agent did not start",
) -> FailureReason:
    """The reason of a failed set-up (``detected``: its command was Ribbit's guess, no
    ``.ribbit.yml`` ``setup``; ``stopped``: what did not happen because of it)."""
    return FailureReason.of(
        f"The repository's setup failed ({setup.summary()}), {stopped}. "
        "This is about the repository's set-up, not a patch.",
        setup.output,
        tuple(b.describe() for b in setup.blocked),
        _setup_fixer(setup, detected=detected, permitted_hosts=permitted_hosts),
    )


def _setup_fixer(setup: SetupResult, *, detected: bool, permitted_hosts: Sequence[str]) -> Fixer:
    if _TLS_MARKERS.search(setup.output):
        return TLS_FIXER  # the refusals that follow a failed handshake are its echo
    if setup.timed_out:
        return Fixer(
            "operator",
            "RIBBIT_SANDBOX__SETUP_TIMEOUT_S",
            "the setup command did not finish in time: raise the limit, or have `setup` "
            "install less.",
        )
    if setup.exit_code is None:
        return Fixer(
            "operator",
            "RIBBIT_SANDBOX__IMAGE",
            "the sandbox image could not create a Python environment (it needs python3 with venv).",
        )
    found = hosts_fixer(setup.blocked, permitted_hosts) or output_fixer(setup.output)
    if found is not None:
        return found
    if detected:
        return Fixer(
            "maintainer",
            "setup",
            "`.ribbit.yml` names no `setup`, so this was the usual install for what the "
            'repository declares: name the right command in `setup`, or `setup: ""` if '
            "nothing needs installing.",
        )
    return Fixer("maintainer", "setup", "the command failed: its output is below.")


def _names(hosts: Iterable[str]) -> str:
    seen: list[str] = []
    for host in hosts:
        if host not in seen:
            seen.append(host)
    return ", ".join(f"`{h}`" for h in seen)
