"""`ribbit outcomes`: what happened to the bot's pull requests, for admins and the trainer."""

from __future__ import annotations

import json
from pathlib import Path

import click

from bot.cli_options import FILTER_FORGE_HELP, filter_forge, forge_option, repo_option
from bot.console import echo_json
from bot.forges.base import RepoRef
from bot.runtime import open_database
from bot.settings import SettingsError
from bot.store.outcomes import OutcomeStore, outcome_dict
from worker.settings import load_worker_settings


@click.command("outcomes")
@click.option("--json", "as_json", is_flag=True, help="One JSON array.")
@click.option(
    "--export",
    "export",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write every outcome as JSONL (for `ribbit envs`).",
)
@repo_option("Only this repository's outcomes")
@forge_option(FILTER_FORGE_HELP, default=None)
def outcomes(as_json: bool, export: Path | None, repo: RepoRef | None, forge: str | None) -> None:
    """List bot PR outcomes: merged or closed, by whom, revisions, diff similarity."""
    try:
        # WorkerSettings, as every `ribbit` process: the worker's variables are no typos.
        settings = load_worker_settings()
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from None
    db = open_database(settings)
    rows = [
        outcome_dict(o)
        for o in OutcomeStore(db).outcomes(
            None if repo is None else repo.full_name, filter_forge(repo, forge)
        )
    ]
    db.dispose()
    if export is not None:
        with export.open("w") as fh:
            for row in rows:
                fh.write(json.dumps(row) + "\n")
        click.echo(f"wrote {len(rows)} outcomes to {export}")
        return
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo("no outcomes yet")
        return
    click.echo(f"{'FORGE':7} {'REPO':28} {'PR':>5} {'STATE':7} {'BY':12} {'REV':>3} {'SIM':>5}")
    for r in rows:
        sim = "" if r["diff_similarity"] is None else f"{r['diff_similarity']:.2f}"
        click.echo(
            f"{r['forge']:7} {r['repo'][:28]:28} {r['pr']:>5} {r['state']:7} "
            f"{(r['actor'] or '')[:12]:12} {r['revisions']:>3} {sim:>5}"
        )
