from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from tests.fakes import LocalDirSandbox, make_git_repo
from tests.support import serving

REPO_FILES = {
    "README.md": "# calc\n",
    "calc.py": "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n",
    "pkg/util.py": "X = 1\nX = 1\n",
    "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    make_git_repo(path, REPO_FILES)
    return path


@pytest.fixture
def sandbox(repo: Path) -> Iterator[LocalDirSandbox]:
    with LocalDirSandbox(repo) as sb:
        yield sb


@dataclass
class ChatServer:
    """Answers each POST /v1/chat/completions with the next scripted (status, body)."""

    replies: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    url: str = ""

    def __call__(self, environ: Any, start_response: Any) -> Any:
        request = Request(environ)
        if request.path != "/v1/chat/completions" or request.method != "POST":
            return Response("not found", status=404)(environ, start_response)
        self.requests.append(json.loads(request.get_data()))
        self.headers.append(dict(request.headers))
        status, body = self.replies.pop(0) if self.replies else (500, {"error": "no script"})
        return Response(json.dumps(body), status=status, content_type="application/json")(
            environ, start_response
        )


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    app = ChatServer()
    # A short poll: dozens of tests each stop a server, and shutdown waits out one poll.
    with serving(make_server("127.0.0.1", 0, app, threaded=True), poll_interval=0.05) as url:
        app.url = f"{url}/v1"
        yield app
