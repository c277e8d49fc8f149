"""`ribbit prs`: admin commands on Ribbit's open pull requests (worker/rejudge.py)."""

from __future__ import annotations

import click

from bot.cli import settings_or_exit
from bot.cli_audit import actor_option, cli_actor
from bot.cli_options import FILTER_FORGE_HELP, forge_option, repo_option
from bot.console import echo_json
from bot.forges import ForgeFactory, forge_factory
from bot.forges.base import RepoRef
from bot.runtime import open_database
from bot.store.db import Database
from bot.store.records.gate_report import JUDGE_VERSION
from worker.rejudge import rejudge


def _services() -> tuple[Database, ForgeFactory]:
    """The deployment's database and forge clients (a test passes its own)."""
    settings = settings_or_exit()
    return open_database(settings), forge_factory(settings)


@click.group("prs")
def prs() -> None:
    """Ribbit's open draft pull requests."""


@prs.command("rejudge")
@repo_option("Only this repository's drafts")
@forge_option(FILTER_FORGE_HELP, default=None)
@click.option("--dry-run", is_flag=True, help="Say what would change; change nothing.")
@actor_option
@click.option("--json", "as_json", is_flag=True, help="What was done to each PR as JSON.")
def rejudge_command(
    repo: RepoRef | None, forge: str | None, dry_run: bool, actor: str | None, as_json: bool
) -> None:
    """Re-label open drafts an older judge passed: not verified by today's judge, they
    lose their closing keyword (Refs #N) and say "Not verified" at the top. Idempotent;
    every change is audited. No job re-runs the gates on a PR, so none is queued."""
    db, forges = _services()
    try:
        done = rejudge(db, forges, cli_actor(actor), repo=repo, forge=forge, dry_run=dry_run)
    finally:
        db.dispose()
    if as_json:
        prs = [item.to_json() for item in done]
        echo_json({"judge": JUDGE_VERSION, "dry_run": dry_run, "prs": prs})
        return
    if not done:
        click.echo(f"no Ribbit PR was judged by another judge than {JUDGE_VERSION}")
    for item in done:
        pr = item.pr
        judge = pr.judge or "judged before evidence"
        click.echo(f"{pr.ref} (job {pr.job_id}, {judge}): {item.action.value}")
