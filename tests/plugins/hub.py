"""A fake model hub on 127.0.0.1: the four HTTP calls `huggingface_hub.snapshot_download`
makes (revision info, tree listing, HEAD and GET of a file), serving one folder as one
repository at one commit. No real hub is reachable from tests (nor from CI).

``tamper`` makes it serve different bytes for a file than its tree listing records: what
a corrupted mirror or a man in the middle would do.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from tests.support import local_http

COMMIT = "0123456789abcdef0123456789abcdef01234567"
LFS_SUFFIXES = (".safetensors", ".bin")


@dataclass
class FakeHub:
    repo_id: str
    folder: Path
    url: str = ""
    tamper: dict[str, bytes] = field(default_factory=dict)
    extra_tree: list[dict[str, object]] = field(default_factory=list)  # listed, not served
    requests: list[str] = field(default_factory=list)

    def files(self) -> dict[str, Path]:
        return {
            p.relative_to(self.folder).as_posix(): p
            for p in sorted(self.folder.rglob("*"))
            if p.is_file()
        }

    def tree(self) -> list[dict[str, object]]:
        out: list[dict[str, object]] = []
        for rel, path in self.files().items():
            data = path.read_bytes()
            blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
            entry: dict[str, object] = {"type": "file", "path": rel, "size": len(data)}
            entry["oid"] = blob
            if rel.endswith(LFS_SUFFIXES):
                sha = hashlib.sha256(data).hexdigest()
                entry["lfs"] = {"oid": sha, "size": len(data), "pointerSize": 134}
            out.append(entry)
        return out + self.extra_tree

    def body(self, rel: str) -> bytes | None:
        if rel in self.tamper:
            return self.tamper[rel]
        path = self.files().get(rel)
        return path.read_bytes() if path else None


def _handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    info = f"/api/models/{hub.repo_id}"
    tree = f"/api/models/{hub.repo_id}/tree/{COMMIT}"
    resolve = f"/{hub.repo_id}/resolve/{COMMIT}/"

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _send(self, status: int, body: bytes, headers: dict[str, str], head: bool) -> None:
            self.send_response(status)
            for k, v in {"Content-Length": str(len(body)), **headers}.items():
                self.send_header(k, v)
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def _answer(self, head: bool) -> None:
            path = unquote(urlparse(self.path).path)
            hub.requests.append(f"{self.command} {path}")
            js = {"Content-Type": "application/json"}
            if path == info or path.startswith(info + "/revision/"):
                doc = {"id": hub.repo_id, "sha": COMMIT, "siblings": []}
                self._send(200, json.dumps(doc).encode(), js, head)
            elif path == tree:
                self._send(200, json.dumps(hub.tree()).encode(), js, head)
            elif path.startswith(resolve) and (body := hub.body(path[len(resolve) :])):
                etag = hashlib.sha256(body).hexdigest()
                headers = {"X-Repo-Commit": COMMIT, "ETag": f'"{etag}"'}
                self._send(200, body, headers, head)
            else:
                self._send(404, b'{"error": "not found"}', js, head)

        def do_GET(self) -> None:
            self._answer(head=False)

        def do_HEAD(self) -> None:
            self._answer(head=True)

    return Handler


@pytest.fixture
def fake_hub(tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    """The tiny model served as ``microsoft/FrogNano-4B-2609`` on 127.0.0.1."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    hub = FakeHub("microsoft/FrogNano-4B-2609", tiny_model_dir)
    with local_http(_handler(hub)) as url:
        hub.url = url
        yield hub
