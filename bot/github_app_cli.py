"""`ribbit github-app create`: the GitHub App registered from Ribbit's manifest (the flow is
github_app_setup.py's; this is its terminal side)."""

from __future__ import annotations

import threading

import click

from bot.console import line
from bot.github_app_setup import SetupFlow, page_url, serve, settings_lines
from bot.settings import Settings


@click.group("github-app")
def github_app() -> None:
    """Ribbit's GitHub App."""


@github_app.command("create")
@click.option(
    "--webhook-url",
    required=True,
    help="Where GitHub is to send webhooks: https://HOST/webhooks/github, reachable from GitHub.",
)
@click.option("--org", default=None, help="Create the App in this organization (default: you).")
@click.option("--name", default="Ribbit", show_default=True, help="The App's name on GitHub.")
@click.option(
    "--port", type=int, default=0, help="Loopback port of the set-up page (default: any free)."
)
def create(webhook_url: str, org: str | None, name: str, port: int) -> None:
    """Serve a page on 127.0.0.1 that registers the App from a manifest (its permissions
    and events set by Ribbit), then print the settings that make Ribbit act as it."""
    if not webhook_url.startswith(("https://", "http://")):
        raise click.BadParameter(
            "must start with https:// or http://", param_hint="'--webhook-url'"
        )
    # The root command built the process's settings (None where they are invalid).
    settings = click.get_current_context().find_root().obj
    if not isinstance(settings, Settings):
        raise click.ClickException("the settings are invalid: `ribbit doctor` says why")
    flow = SetupFlow(
        api_url=settings.github.api_url,
        webhook_url=webhook_url,
        data_dir=settings.data_dir,
        name=name,
        org=org,
    )
    server = serve(flow, port)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    line(f"Open {page_url(server)}/ in a browser on this machine (Ctrl-C to give up).")
    try:
        flow.done.wait()
    finally:
        server.shutdown()
        server.server_close()
    assert flow.created is not None and flow.key_file is not None
    line(f"Created the GitHub App {flow.created.slug} ({flow.created.html_url}).")
    line("Set these for every Ribbit process, then install the App on your repositories:")
    for setting in settings_lines(flow.created, flow.key_file, settings.github.api_url):
        click.echo(f"  {setting}")
    if not flow.created.webhook_secret:
        line("GitHub gave no webhook secret: set one in the App's settings and the same value")
        line("in RIBBIT_GITHUB__WEBHOOK_SECRET.")
