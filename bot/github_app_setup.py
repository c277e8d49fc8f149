"""Registering Ribbit's GitHub App from a manifest (GitHub's documented manifest flow), so
its permissions and events are right by construction.

`ribbit github-app create` serves one page on loopback: a form that posts the manifest to
GitHub, where the operator confirms the App's name; GitHub sends the browser back to the
page's callback with a one-hour code, which is exchanged (POST /app-manifests/{code}/
conversions) for the App's id, private key and webhook secret. The key is written to the
data dir (mode 0600) and the settings to use are printed on the terminal, never shown in
the browser. The page listens on 127.0.0.1 only, and the callback takes only the state
its own page handed out.
"""

from __future__ import annotations

import hmac
import html
import json
import os
import secrets
import socketserver
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import requests

from bot.forges.base import ForgeError
from bot.forges.credentials import GITHUB_APP_NEEDS

# What the App may do: the job's needs at write (credentials.py checks the same names),
# check runs for the gate review, and metadata, which every App has.
APP_PERMISSIONS: dict[str, str] = {
    **{name: "write" for name in GITHUB_APP_NEEDS},
    "checks": "write",
    "metadata": "read",
}
# The webhooks Ribbit acts on (bot/web/normalize.py's from_github).
APP_EVENTS = ("issues", "issue_comment", "pull_request", "pull_request_review")
CONVERSION_TIMEOUT_S = 30


@dataclass(frozen=True)
class CreatedApp:
    """What GitHub answers the code with; the key and secret never reach a log."""

    id: int
    slug: str
    html_url: str
    pem: str = field(repr=False)
    webhook_secret: str | None = field(repr=False)


def web_url(api_url: str) -> str:
    """github.com for api.github.com; https://HOST for GitHub Enterprise's /api/v3."""
    api = api_url.rstrip("/")
    if api == "https://api.github.com":
        return "https://github.com"
    return api.removesuffix("/api/v3")


def manifest(name: str, webhook_url: str, callback_url: str) -> dict[str, Any]:
    origin = urllib.parse.urlsplit(webhook_url)
    return {
        "name": name,
        "url": f"{origin.scheme}://{origin.netloc}",
        "hook_attributes": {"url": webhook_url, "active": True},
        "redirect_url": callback_url,
        "public": False,
        "default_permissions": dict(APP_PERMISSIONS),
        "default_events": list(APP_EVENTS),
    }


def new_app_url(api_url: str, state: str, org: str | None) -> str:
    owner = f"/organizations/{urllib.parse.quote(org, safe='')}" if org else ""
    return f"{web_url(api_url)}{owner}/settings/apps/new?state={urllib.parse.quote(state)}"


def exchange(api_url: str, code: str) -> CreatedApp:
    """POST /app-manifests/{code}/conversions: the code GitHub's redirect carried, for the
    App's credentials (it needs no authentication, and works once within an hour)."""
    url = f"{api_url.rstrip('/')}/app-manifests/{urllib.parse.quote(code, safe='')}/conversions"
    try:
        answer = requests.post(
            url, headers={"Accept": "application/vnd.github+json"}, timeout=CONVERSION_TIMEOUT_S
        )
    except requests.RequestException as exc:
        raise ForgeError(
            f"GitHub unreachable while creating the App: {type(exc).__name__}"
        ) from None
    if answer.status_code != 201:
        raise ForgeError(
            f"GitHub answered {answer.status_code} to the App's code (used already, or more "
            "than an hour old?): start again"
        )
    data = answer.json()
    return CreatedApp(
        id=int(data["id"]),
        slug=str(data["slug"]),
        html_url=str(data.get("html_url") or ""),
        pem=str(data["pem"]),
        webhook_secret=data.get("webhook_secret"),
    )


def save_key(app: CreatedApp, data_dir: Path) -> Path:
    """The private key in DATA_DIR, readable by this user only; never over an existing file."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / f"github-app-{app.id}.pem"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(app.pem)
    return path


def settings_lines(app: CreatedApp, key_file: Path, api_url: str) -> list[str]:
    """The environment that makes Ribbit act as the new App."""
    lines = [f"RIBBIT_GITHUB__APP_ID={app.id}", f"RIBBIT_GITHUB__PRIVATE_KEY_FILE={key_file}"]
    if app.webhook_secret:
        lines.append(f"RIBBIT_GITHUB__WEBHOOK_SECRET={app.webhook_secret}")
    if api_url.rstrip("/") != "https://api.github.com":
        lines.append(f"RIBBIT_GITHUB__API_URL={api_url}")
    return lines


@dataclass
class SetupFlow:
    """One App registration: the page's state, and what the callback produced."""

    api_url: str
    webhook_url: str
    data_dir: Path
    name: str = "Ribbit"
    org: str | None = None
    state: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    created: CreatedApp | None = None
    key_file: Path | None = None
    done: threading.Event = field(default_factory=threading.Event)
    # The server answers requests in threads: a reloaded callback must not exchange twice.
    _exchanging: threading.Lock = field(default_factory=threading.Lock)

    def page(self, callback_url: str) -> str:
        body = html.escape(json.dumps(manifest(self.name, self.webhook_url, callback_url)))
        action = html.escape(new_app_url(self.api_url, self.state, self.org))
        return (
            "<!doctype html><title>Ribbit: create the GitHub App</title>"
            f"<h1>Create Ribbit's GitHub App</h1><p>Webhooks go to "
            f"{html.escape(self.webhook_url)}.</p>"
            f'<form method="post" action="{action}">'
            f'<input type="hidden" name="manifest" value="{body}">'
            '<button type="submit">Create the App on GitHub</button></form>'
        )

    def callback(self, query: dict[str, list[str]]) -> str:
        state = (query.get("state") or [""])[0]
        code = (query.get("code") or [""])[0]
        if not code or not hmac.compare_digest(state.encode(), self.state.encode()):
            raise PermissionError("this callback is not for the page this command served")
        with self._exchanging:
            if self.created is None:
                self.created = exchange(self.api_url, code)
                self.key_file = save_key(self.created, self.data_dir)
                self.done.set()
        return (
            "<!doctype html><title>Ribbit: App created</title>"
            f"<h1>Created {html.escape(self.created.slug)}</h1>"
            "<p>Its settings are on the terminal that ran <code>ribbit github-app create</code>."
            " Install the App on your repositories next.</p>"
        )


def page_url(server: socketserver.BaseServer) -> str:
    """Where the set-up page of a server built by :func:`serve` is."""
    address = server.server_address
    assert isinstance(address, tuple)  # an IPv4 (host, port) pair
    return f"http://{address[0]}:{address[1]}"


def serve(flow: SetupFlow, port: int = 0) -> ThreadingHTTPServer:
    """The loopback server of ``flow`` (``port`` 0: any free one), not yet serving."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            try:
                if url.path == "/":
                    text = flow.page(f"{page_url(self.server)}/callback")
                elif url.path == "/callback":
                    text = flow.callback(urllib.parse.parse_qs(url.query))
                else:
                    self.send_error(404)
                    return
            except PermissionError as exc:
                self.send_error(403, str(exc))
                return
            except ForgeError as exc:
                self.send_error(502, str(exc))
                return
            self._send(text)

        def _send(self, text: str) -> None:
            body = text.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Cache-Control", "no-store")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the query string carries the code: keep it off the terminal

    return ThreadingHTTPServer(("127.0.0.1", port), Handler)
