"""The host's side of the resident runner, against a scripted runner on a pipe: answers
are matched by id, forged and overlong lines are dropped, a runner that ends fails the
call, and answers parse into ExecResults the way both backends report them."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

from worker.sandbox import SandboxError
from worker.sandbox import session as session_module
from worker.sandbox.session import (
    SERVER_BOOTSTRAP,
    SessionClient,
    exec_request,
    parse_result,
)


def _answer(rid: object, rc: int = 0, out: bytes = b"", out_total: int | None = None) -> bytes:
    message = {
        "id": rid,
        "rc": rc,
        "out": base64.b64encode(out).decode(),
        "err": "",
        "out_total": len(out) if out_total is None else out_total,
        "err_total": 0,
    }
    return json.dumps(message).encode() + b"\n"


@dataclass
class Runner:
    """A pipe standing in for the runner's output, and the clients reading it."""

    write_fd: int
    read_fd: int
    clients: list[SessionClient] = field(default_factory=list)

    def client(self, reply: Callable[[int], bytes]) -> SessionClient:
        """A client whose runner answers each request with ``reply(request id)``."""

        def send(data: bytes) -> None:
            os.write(self.write_fd, reply(json.loads(data)["id"]))

        client = SessionClient(send, lambda: os.read(self.read_fd, 1 << 16))
        self.clients.append(client)
        return client


@pytest.fixture
def runner() -> Iterator[Runner]:
    read_fd, write_fd = os.pipe()
    pipe = Runner(write_fd, read_fd)
    yield pipe
    os.close(write_fd)
    # The read end is closed only once no reader can still read it.
    assert all(client.ended.wait(30) for client in pipe.clients)
    os.close(read_fd)


def test_answer_goes_to_its_request_and_forgeries_are_dropped(
    runner: Runner,
) -> None:
    def reply(rid: int) -> bytes:
        return (
            b"not json\n"
            + _answer(rid + 1, rc=0, out=b"forged: another id")
            + b'{"id": "x"}\n'
            + _answer(rid, rc=3, out=b"real")
        )

    client = runner.client(reply)
    answer = client.call({"argv": ["true"]}, 30)
    assert answer is not None
    assert (answer["rc"], base64.b64decode(str(answer["out"]))) == (3, b"real")


def test_overlong_line_is_dropped_whole(runner: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session_module, "MAX_LINE", 1000)

    # A line longer than a line may be whose tail parses as an answer (JSON allows the
    # leading blanks): neither the whole line nor its tail may be taken for one.
    def reply(rid: int) -> bytes:
        return b" " * 70000 + _answer(rid, rc=9) + _answer(rid, rc=0)

    client = runner.client(reply)
    answer = client.call({"argv": ["true"]}, 30)
    assert answer is not None and answer["rc"] == 0


def test_runner_that_ends_fails_the_call_and_the_next() -> None:
    read_fd, write_fd = os.pipe()

    def send(data: bytes) -> None:
        os.close(write_fd)  # the runner dies without answering

    client = SessionClient(send, lambda: os.read(read_fd, 1 << 16))
    with pytest.raises(SandboxError, match="died"):
        client.call({"argv": ["true"]}, 30)
    assert client.ended.wait(30)
    os.close(read_fd)
    with pytest.raises(SandboxError, match="gone"):
        client.call({"argv": ["true"]}, 30)


def test_parse_result_caps_output_and_reads_timeouts() -> None:
    capped = parse_result(json.loads(_answer(1, rc=0, out=b"abcdef", out_total=10)), 0.1, 30, 4)
    assert (capped.stdout, capped.truncated, capped.timed_out) == ("abcd", True, False)
    late = parse_result(json.loads(_answer(1, rc=124)), 30.0, 30, 100)
    assert (late.exit_code, late.timed_out) == (124, True)
    own = parse_result(json.loads(_answer(1, rc=124)), 0.5, 30, 100)
    assert (own.exit_code, own.timed_out) == (124, False)
    with pytest.raises(SandboxError, match="nonsense"):
        parse_result({"id": 1, "rc": "x"}, 0.1, 30, 100)


def test_exec_request_is_the_allow_listed_command() -> None:
    request = exec_request("echo hi", timeout=5, cwd="pkg", env={"A": "1"}, output_cap=10)
    assert request["argv"] == ["bash", "-lc", "echo hi"]
    assert request["cwd"] == "/workspace/pkg"
    env = request["env"]
    assert isinstance(env, dict) and env["A"] == "1" and "RIBBIT_GITHUB__TOKEN" not in env
    with pytest.raises(ValueError):
        exec_request("true", timeout=0, cwd="/workspace", env=None, output_cap=10)
    with pytest.raises(PermissionError):
        exec_request("true", timeout=5, cwd="../..", env=None, output_cap=10)


@pytest.mark.parametrize(
    ("command", "env"),
    [(["echo", "a\ud800b"], None), ("echo \udfff", None), ("true", {"A": "\ud83d"})],
)
def test_text_no_process_can_be_given_is_refused_before_it_is_sent(
    command: str | list[str], env: dict[str, str] | None
) -> None:
    # The runner inside could not start it and would never answer (issue #34 item 7).
    with pytest.raises(UnicodeEncodeError):
        exec_request(command, timeout=5, cwd="/workspace", env=env, output_cap=10)
    # A byte that is not UTF-8, as Python holds it (surrogateescape), is passed on.
    assert exec_request(["cat", "\udc80"], timeout=5, cwd="/workspace", env=None, output_cap=10)


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf")])
def test_exec_request_refuses_a_timeout_that_would_never_end(timeout: float) -> None:
    # NaN compares false with everything: a bare ``timeout <= 0`` lets it through, and
    # the runner's deadline would then never pass.
    with pytest.raises(ValueError):
        exec_request("true", timeout=timeout, cwd="/workspace", env=None, output_cap=10)


def test_bootstrap_runs_exactly_the_source_and_leaves_the_requests_in_the_pipe() -> None:
    # The source arrives in two writes with a pause between (a slow pipe), and a request
    # follows at once: the bootstrap must read the source whole and nothing past it.
    source = b"import os,sys\nassert __name__ == '__main__'\nprint(sys.argv[1:], os.read(0, 99))\n"
    proc = subprocess.Popen(
        [sys.executable, "-I", "-c", SERVER_BOOTSTRAP, str(len(source)), "--inside-sandbox"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdin is not None
    proc.stdin.write(source[:20])
    proc.stdin.flush()
    proc.stdin.write(source[20:] + b'{"id": 1}\n')
    proc.stdin.close()
    assert proc.stdout is not None
    out = proc.stdout.read()
    assert proc.wait(timeout=30) == 0
    assert out == f"['{len(source)}', '--inside-sandbox'] b'{{\"id\": 1}}\\n'\n".encode()


def test_bootstrap_gives_up_when_the_source_never_comes_whole() -> None:
    done = subprocess.run(
        [sys.executable, "-I", "-c", SERVER_BOOTSTRAP, "100"],
        input=b"print('half')",
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 1 and done.stdout == b""
