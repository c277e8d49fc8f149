"""Registering the GitHub App from Ribbit's manifest, against the local forge standing in for
github.com (the operator's confirmation is `confirm_app_manifest`) and its API."""

from __future__ import annotations

import html
import json
import re
import stat
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests
from click.testing import CliRunner

from bot import github_app_cli, github_app_setup
from bot.cli import main
from bot.forge_doctor import forge_checks
from bot.forges.base import ForgeError
from bot.github_app_setup import APP_EVENTS, SetupFlow, exchange, serve, web_url
from bot.settings import Settings
from tests.integration.test_forge_openapi import _validate
from tests.plugins.forge import ForgeWorld
from tests.support import serving

pytestmark = pytest.mark.integration
WEBHOOK_URL = "https://ribbit.example/webhooks/github"


@pytest.fixture
def flow(forge_world: ForgeWorld, tmp_path: Path) -> SetupFlow:
    return SetupFlow(
        api_url=forge_world.forge.github_api_url, webhook_url=WEBHOOK_URL, data_dir=tmp_path
    )


@pytest.fixture
def page_url(flow: SetupFlow) -> Iterator[str]:
    server = serve(flow)
    with serving(server):
        yield github_app_setup.page_url(server)


def _form(page: str) -> tuple[str, dict[str, Any]]:
    action = re.search(r'<form method="post" action="([^"]+)"', page)
    value = re.search(r'name="manifest" value="([^"]+)"', page)
    assert action and value, page
    return html.unescape(action.group(1)), json.loads(html.unescape(value.group(1)))


def test_the_page_posts_a_manifest_with_ribbits_permissions_and_events(
    flow: SetupFlow, page_url: str, forge_world: ForgeWorld
) -> None:
    answer = requests.get(f"{page_url}/", timeout=30)

    action, manifest = _form(answer.text)
    web = web_url(forge_world.forge.github_api_url)
    assert action == f"{web}/settings/apps/new?state={flow.state}"
    assert manifest["hook_attributes"] == {"url": WEBHOOK_URL, "active": True}
    assert manifest["redirect_url"] == f"{page_url}/callback"
    assert manifest["public"] is False
    assert manifest["default_permissions"] == {
        "contents": "write",
        "pull_requests": "write",
        "issues": "write",
        "statuses": "write",
        "checks": "write",
        "metadata": "read",
    }
    assert manifest["default_events"] == list(APP_EVENTS)
    assert answer.headers["Cache-Control"] == "no-store"


def test_the_callback_exchanges_the_code_saves_the_key_and_the_app_works(
    flow: SetupFlow, page_url: str, forge_world: ForgeWorld, tmp_path: Path
) -> None:
    world = forge_world
    _, manifest = _form(requests.get(f"{page_url}/", timeout=30).text)
    code = world.forge.confirm_app_manifest(manifest)

    forged = requests.get(f"{page_url}/callback?code={code}&state=guessed", timeout=30)
    assert forged.status_code == 403 and not flow.done.is_set()
    answer = requests.get(f"{page_url}/callback?code={code}&state={flow.state}", timeout=30)

    assert answer.status_code == 200 and flow.done.is_set()
    created, key_file = flow.created, flow.key_file
    assert created is not None and key_file is not None
    assert created.slug in answer.text and created.pem not in answer.text
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert key_file.read_text() == created.pem
    # The settings it prints make Ribbit the App: the doctor says so, and sees its install.
    world.forge.add_installation(5, created.id, [world.github.full_name])
    settings = Settings.model_validate(
        {
            "data_dir": tmp_path,
            "github": {
                "api_url": world.forge.github_api_url,
                "app_id": created.id,
                "private_key_file": key_file,
                "webhook_secret": created.webhook_secret,
            },
        }
    )
    checks = {c.name: c for c in forge_checks(settings, [world.github])}
    assert checks["github credentials"].detail == (
        f"authenticated as GitHub App {created.slug} (id {created.id})"
    )
    assert checks[f"github access to {world.github.full_name}"].status == "ok"


def test_a_used_code_is_refused_with_what_to_do(forge_world: ForgeWorld) -> None:
    api = forge_world.forge.github_api_url
    code = forge_world.forge.confirm_app_manifest({"name": "Ribbit"})
    answer = requests.post(f"{api}/app-manifests/{code}/conversions", timeout=30)
    _validate("POST /app-manifests/{code}/conversions", answer.status_code, answer.json())

    with pytest.raises(ForgeError, match=r"answered 404 .* start again"):
        exchange(api, code)


def test_github_app_create_prints_the_settings(
    forge_world: ForgeWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("RIBBIT_GITHUB__API_URL", forge_world.forge.github_api_url)
    browser: list[threading.Thread] = []

    def serve_and_confirm(flow: SetupFlow, port: int = 0) -> ThreadingHTTPServer:
        # The server listens once built: the browser's requests wait for it to serve.
        server = serve(flow, port)

        def operator() -> None:
            page = requests.get(f"{github_app_setup.page_url(server)}/", timeout=30).text
            _, manifest = _form(page)
            code = forge_world.forge.confirm_app_manifest(manifest)
            requests.get(f"{manifest['redirect_url']}?code={code}&state={flow.state}", timeout=30)

        browser.append(threading.Thread(target=operator))
        browser[0].start()
        return server

    monkeypatch.setattr(github_app_cli, "serve", serve_and_confirm)

    result = CliRunner().invoke(main, ["github-app", "create", "--webhook-url", WEBHOOK_URL])

    browser[0].join()
    assert result.exit_code == 0, result.output
    [app_id] = re.findall(r"RIBBIT_GITHUB__APP_ID=(\d+)", result.output)
    assert f"RIBBIT_GITHUB__PRIVATE_KEY_FILE={tmp_path}/github-app-{app_id}.pem" in result.output
    assert re.search(r"RIBBIT_GITHUB__WEBHOOK_SECRET=[0-9a-f]{64}", result.output)
    assert f"RIBBIT_GITHUB__API_URL={forge_world.forge.github_api_url}" in result.output


def test_github_app_create_refuses_a_webhook_url_that_is_no_url() -> None:
    result = CliRunner().invoke(main, ["github-app", "create", "--webhook-url", "ribbit.example"])
    assert result.exit_code == 2 and "'--webhook-url'" in result.output
