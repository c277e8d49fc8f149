"""Helpers the tests import: service requirements, webhook secrets, payloads, signed
headers, a held group-commit lead (to queue webhooks into one batch), real projects'
sdists from the package index, vendored projects' trees from their patches (the end to
end tests and the set-up benchmark build them the same way), ``ribbit gates`` on
bubblewrap as a user runs it, loopback HTTP servers that serve for a block (one of them
a stand-in for PyTorch's CPU index), the README quickstart's steps and command
blocks, and a ``--json`` command's stdout read as every such command prints it.
Fixtures live in tests/conftest.py and tests/plugins/; this module holds none."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import re
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def require_service(available: bool, what: str) -> None:
    """Skip on a laptop without ``what``; fail under CI=true, where a skip would hide a
    missing install step."""
    if available:
        return
    if in_ci():
        pytest.fail(f"{what} is required under CI=true but is not available")
    pytest.skip(f"{what} not available")


FIXTURES = Path(__file__).parent / "fixtures"
# Shared secrets as an operator generates them (bot/settings.py refuses weak ones at
# start-up): every test that configures one takes it from here rather than making one up.
GITHUB_SECRET = "E6rF-AFVyLFvEx240_yqJcErd4Y7BFimyv-xGJJqHbc"
GITLAB_TOKEN = "tgeFP1D5tIxERLCvbqUWZfIUov7PIXIldMzlheVNItQ"
LINK_SECRET = "00OwXaFRyjLt0zHuz31oh-xt9--A8fD2dZFuckU_WpQ"
OTHER_SECRET = "slE3xXFmxnAzuAgMqQejoUeO2OQh-sHsmbkynfbznr8"


def load_payload(forge: str, name: str) -> dict[str, Any]:
    """A real webhook payload from tests/fixtures/<forge>/<name>.json."""
    data: dict[str, Any] = json.loads((FIXTURES / forge / f"{name}.json").read_text())
    return data


def github_headers(
    body: bytes, event: str, delivery: str, secret: str = GITHUB_SECRET
) -> dict[str, str]:
    from bot.web.signatures import sign_github

    return {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": sign_github(secret, body),
        "Content-Type": "application/json",
    }


def gitlab_headers(event: str, delivery: str, token: str = GITLAB_TOKEN) -> dict[str, str]:
    return {
        "X-Gitlab-Event": event,
        "X-Gitlab-Event-UUID": delivery,
        "X-Gitlab-Token": token,
        "Content-Type": "application/json",
    }


def flushed(app: Any, response: Any) -> Any:
    """``response`` once the jobs of the request it answers were handed to the broker: the
    answer comes first and the background sender after, so a test that looks at what was
    sent waits on the sender (an event, not a sleep)."""
    app.extensions["ribbit"].intake.flush()
    return response


class HeldLead:
    """Holds the lead of a ``GroupCommit``: a thread runs a work that waits at a gate, so
    that works submitted meanwhile queue behind it and then run together as one batch.
    ``wait_queued(n)`` returns once n works are queued; ``release()`` opens the gate and
    joins the leader, whose work then runs ``then`` (if given) and keeps its result in
    ``outcome`` (or the exception it raised)."""

    def __init__(self, commits: Any, then: Any = None) -> None:
        self._commits = commits
        self._gate, leading = threading.Event(), threading.Event()
        self.outcome: object = None

        def held(session: Any) -> object:
            leading.set()
            self._gate.wait(30)
            return then(session) if then is not None else None

        def lead() -> None:
            try:
                self.outcome = commits.run(held)
            except BaseException as exc:
                self.outcome = exc

        self._thread = threading.Thread(target=lead)
        self._thread.start()
        assert leading.wait(30), "the leader never started its work"

    def wait_queued(self, count: int) -> None:
        deadline = time.monotonic() + 30  # a bound on a hang, not a timing assumption
        while len(self._commits._pending) < count and time.monotonic() < deadline:
            time.sleep(0.001)
        assert len(self._commits._pending) == count

    def release(self) -> None:
        self._gate.set()
        self._thread.join(30)


def score_heldout(db: Any, subject: str, solved: list[int], *, line: str = "default") -> None:
    """Store ``subject``'s per-environment held-out results (a version's name, or
    ``base:<model>``): env-i solved ``solved[i]`` of 1 rollout, by the current judge. What a
    promotion's paired test compares (trainer/promotion.py)."""
    from trainer.promotion import JUDGE_VERSION
    from trainer.store import ScoredEnv, TrainerStore

    TrainerStore(db).record_results(
        subject,
        line,
        [ScoredEnv(f"env-{i}", f"hash-{i}", 1, c, JUDGE_VERSION) for i, c in enumerate(solved)],
        judge=JUDGE_VERSION,
    )


def pinned_sdist(requirement: str, where: Path, sha256: str | None = None) -> Path | None:
    """The unpacked source tree of ``requirement`` (``name==version``), downloaded from
    the package index into ``where`` without its dependencies; None when the index could
    not be reached. With ``sha256``, the archive must be that one (an assertion)."""
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pip", "download", requirement, "--no-deps"),
            *("--no-binary", ":all:", "--disable-pip-version-check", "-q", "-d", str(where)),
        ],
        capture_output=True,
        check=False,
    )
    name, version = requirement.split("==")
    archives = list(where.glob(f"{name}-*.tar.gz"))
    if done.returncode != 0 or len(archives) != 1:
        return None
    if sha256 is not None:
        assert hashlib.sha256(archives[0].read_bytes()).hexdigest() == sha256
    with tarfile.open(archives[0]) as tar:
        tar.extractall(where, filter="data")
    return where / f"{name}-{version}"


def tree_from_patch(patch: Path, where: Path) -> Path:
    """``where`` (new) holding the tree that ``patch``, a diff from the empty tree (a
    vendored fixture's ``base.patch``), creates; git applies it, so the file modes it
    records hold (a test script stays executable)."""
    where.mkdir(parents=True)
    subprocess.run(["git", "apply", str(patch)], cwd=where, check=True)
    return where


@dataclass(frozen=True)
class GatesRun:
    """One ``ribbit gates --json`` over ``checkout`` with ``patch`` and the issue text,
    Ribbit's data (and so its set-up cache) in ``data``; ``extra`` goes on the command
    line as given, ``env`` into its environment (the docker backend's engine, image)."""

    checkout: Path
    patch: Path
    issue: str
    data: Path
    extra: tuple[str, ...] = ()
    backend: str = "bubblewrap"
    env: tuple[tuple[str, str], ...] = ()


GatesResult = tuple[int, dict[str, Any]]
# One ``ribbit gates`` run's ceiling in the tests: its set-up and test runs have limits of
# their own well under it; this one ends a run that hangs outside them.
GATES_RUN_LIMIT_S = 1200


def gates_on_bubblewrap(
    checkout: Path, patch: Path, issue: str, data: Path, *extra: str
) -> GatesResult:
    """``ribbit gates --json`` on bubblewrap, as a user runs it (its own process): the
    exit code and the report."""
    return run_gates(GatesRun(checkout, patch, issue, data, extra))


def run_gates(run: GatesRun) -> GatesResult:
    args = ["--checkout", str(run.checkout), "--patch", str(run.patch)]
    args += ["--backend", run.backend, "--json", "--issue", run.issue, *run.extra]
    done = subprocess.run(
        [sys.executable, "-m", "bot", "gates", *args],
        env=os.environ | dict(run.env) | {"RIBBIT_DATA_DIR": str(run.data)},
        capture_output=True,
        text=True,
        check=False,
        timeout=GATES_RUN_LIMIT_S,
    )
    try:
        report: dict[str, Any] = json.loads(done.stdout)
    except ValueError:
        raise AssertionError(
            f"ribbit gates (exit {done.returncode}) printed no JSON report:\n"
            f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        ) from None
    return done.returncode, report


def gates_side_by_side(queues: Sequence[Sequence[GatesRun]]) -> dict[GatesRun, GatesResult]:
    """Every run of ``queues``: each queue's runs one after another (runs of one project
    share a data dir, and so a set-up cache, as two jobs on one repository would), the
    queues side by side, as many at once as the machine has cores (at most 4). A gates
    run spends much of its time waiting on set-up and sandboxes, which is why two at once
    take less than twice as long even on two cores; nothing a test asserts depends on
    the order the runs finish in."""

    def drain(queue: Sequence[GatesRun]) -> list[tuple[GatesRun, GatesResult]]:
        return [(run, run_gates(run)) for run in queue]

    workers = max(1, min(4, os.cpu_count() or 1, len(queues)))
    longest_first = sorted(queues, key=len, reverse=True)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return {run: result for done in pool.map(drain, longest_first) for run, result in done}


class _TorchPage(http.server.BaseHTTPRequestHandler):
    """A PEP 503 index that has a torch project page at /whl/cpu/torch/ and nothing else."""

    def do_GET(self) -> None:
        found = self.path == "/whl/cpu/torch/"
        self.send_response(200 if found else 404)
        self.end_headers()
        if found:
            self.wfile.write(b'<a href="torch-2.13.0+cpu-cp311-none-linux_x86_64.whl">t</a>')

    def log_message(self, format: str, *args: object) -> None:  # quiet test output
        pass


@contextmanager
def serving(server: http.server.HTTPServer, *, poll_interval: float = 0.5) -> Iterator[str]:
    """``server`` (built, so already listening on 127.0.0.1) served from a thread while the
    block runs: yields ``http://127.0.0.1:PORT``. For servers something else builds (a WSGI
    app's, the code under test's); :func:`local_http` builds one for a handler. Stopping
    waits out at most one ``poll_interval``."""
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": poll_interval}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        # shutdown() returns only once serve_forever has left its loop: the join is short.
        server.shutdown()
        server.server_close()
        thread.join()


@contextmanager
def local_http(
    handler: type[http.server.BaseHTTPRequestHandler],
    *,
    server_class: type[http.server.HTTPServer] = http.server.ThreadingHTTPServer,
) -> Iterator[str]:
    """``handler`` served on a free loopback port from a thread while the block runs:
    yields ``http://127.0.0.1:PORT``. ``server_class`` is threaded unless a test needs
    requests answered one at a time."""
    with serving(server_class(("127.0.0.1", 0), handler)) as url:
        yield url


@contextmanager
def torch_cpu_index() -> Iterator[str]:
    """A local stand-in for PyTorch's CPU index (unreachable from these machines), for
    scripts/torch-index.sh to probe through TORCH_CPU_INDEX: yields its URL."""
    with local_http(_TorchPage) as url:
        yield f"{url}/whl/cpu"


class QuickstartShapeError(AssertionError):
    """The README's quickstart is no longer numbered steps with indented command blocks:
    a test that reads it must stop rather than run nothing."""


@dataclass(frozen=True)
class QuickstartStep:
    """One numbered step of the README's quickstart: its bold title and the lines of each
    indented code block in it (dedented; a block's own indentation is kept)."""

    number: int
    title: str
    text: str
    blocks: tuple[tuple[str, ...], ...]


QUICKSTART_HEADING = "## Quickstart: from a fresh machine to a draft PR"
_STEP_START = re.compile(r"^(\d+)\. \*\*([^*]+)\*\*", re.M)


def quickstart_steps(readme: str) -> list[QuickstartStep]:
    """The quickstart's steps in order; QuickstartShapeError when the heading is gone, the
    steps are not numbered 1, 2, ... or a code block sits outside a step."""
    if QUICKSTART_HEADING + "\n" not in readme:
        raise QuickstartShapeError(f"no {QUICKSTART_HEADING!r} heading in the README")
    body = readme.split(QUICKSTART_HEADING + "\n", 1)[1]
    body = re.split(r"^## ", body, maxsplit=1, flags=re.M)[0]
    starts = list(_STEP_START.finditer(body))
    numbers = [int(m.group(1)) for m in starts]
    if not numbers or numbers != list(range(1, len(numbers) + 1)):
        raise QuickstartShapeError(f"the quickstart's steps are numbered {numbers}")
    if _blocks(body[: starts[0].start()], indent=0):
        raise QuickstartShapeError("a code block before the first step")
    ends = [m.start() for m in starts[1:]] + [len(body)]
    return [
        QuickstartStep(
            number=n,
            title=m.group(2).strip(),
            text=body[m.start() : end],
            # A step's prose is indented under its number ("1. " is 3 wide, "10. " 4):
            # a code block inside it, 4 more.
            blocks=_blocks(body[m.start() : end], indent=len(f"{n}. ")),
        )
        for n, m, end in zip(numbers, starts, ends, strict=True)
    ]


def _blocks(text: str, *, indent: int) -> tuple[tuple[str, ...], ...]:
    """The indented code blocks of a list item whose prose is indented ``indent``: runs of
    lines indented ``indent + 4`` or more that follow a blank line."""
    code = " " * (indent + 4)
    blocks: list[tuple[str, ...]] = []
    current: list[str] = []
    previous_blank = False
    for line in text.splitlines():
        if current and (line.startswith(code) or not line.strip()):
            current.append(line[len(code) :])
            continue
        if current:
            blocks.append(_trimmed(current))
            current = []
        if previous_blank and line.startswith(code):
            current = [line[len(code) :]]
        previous_blank = not line.strip()
    if current:
        blocks.append(_trimmed(current))
    return tuple(blocks)


def _trimmed(block: list[str]) -> tuple[str, ...]:
    """``block`` less the blank lines it ran on with (they separate it from the prose)."""
    while block and not block[-1].strip():
        block.pop()
    return tuple(block)


def printed_json(stdout: str) -> Any:
    """A ``--json`` command's stdout, parsed, once it is seen to be printed as every
    ``--json`` command prints (bot.console.echo_json: indented by two, one trailing
    newline), so a script or a person reads each command's object alike."""
    value = json.loads(stdout)
    assert stdout == json.dumps(value, indent=2) + "\n", f"not printed by echo_json: {stdout!r}"
    return value
