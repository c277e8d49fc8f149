"""`ribbit data`: one repository's stored training data (trainer/data.py), and the model
line each repository trains and is served by (bot/model_lines.py)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from bot.cli_audit import actor_option, audited, cli_actor
from bot.cli_options import forge_option, repo_option
from bot.console import echo_json, empty
from bot.forges.base import RepoRef
from bot.runtime import open_database
from bot.settings import Settings, SettingsError
from bot.store.db import Database
from trainer.cli.common import store_option
from trainer.envs.folders import EnvironmentFolders
from worker.settings import load_worker_settings

# --forge is optional where --repo names it (gitlab:group/project); GitHub otherwise.
_forge = forge_option()
_repo = repo_option("The repository", required=True)
# What a script reads instead of the sentence; the lines said along the way go to stderr.
_json_option = click.option(
    "--json", "as_json", is_flag=True, help="What was done as one JSON object on stdout."
)


def _settings(ctx: click.Context) -> Settings:
    settings = ctx.find_root().obj
    if isinstance(settings, Settings):
        return settings
    try:
        # WorkerSettings, as the root group builds: the worker's variables are no typos.
        return load_worker_settings()
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from None


def _open(ctx: click.Context, store: Path | None) -> tuple[Settings, Database, EnvironmentFolders]:
    settings = _settings(ctx)
    return (
        settings,
        open_database(settings),
        EnvironmentFolders(store or settings.data_dir / "trainer"),
    )


@click.group()
def data() -> None:
    """A repository's outcomes, trajectories and environments: list, export, delete."""


@data.command("list")
@forge_option(
    "Only this forge's repositories (and --repo's forge where it has no prefix).", default=None
)
@repo_option("Only this repository")
@click.option("--json", "as_json", is_flag=True, help="One JSON array.")
@store_option
@click.pass_context
def list_data(
    ctx: click.Context,
    forge: str | None,
    repo: RepoRef | None,
    as_json: bool,
    store: Path | None,
) -> None:
    """What is stored per repository, and the model line it trains."""
    from bot.model_lines import repo_line
    from trainer.data import repo_data, stored_repos

    settings, db, env_store = _open(ctx, store)
    repos = [
        r
        for r in stored_repos(db, env_store)
        if (forge is None or r.forge == forge) and (repo is None or r == repo)
    ]
    rows = []
    for r in repos:
        row = repo_data(db, env_store, settings.data_dir, r).summary()
        row["line"] = repo_line(db, settings.training, r)
        rows.append(row)
    db.dispose()
    if as_json:
        echo_json(rows)
        return
    if not rows:
        empty("no stored data for any repository")
        return
    for row in rows:
        click.echo(
            f"{row['forge']}:{row['repo']}\tline {row['line'] or '-'}\t"
            f"outcomes {row['outcomes']}\tjobs {row['jobs']}\t"
            f"trajectories {row['trajectories']}\tenvironments {row['environments']}"
        )


@data.command("export")
@_forge
@_repo
@click.option(
    "--out",
    required=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="The .tar.gz to write.",
)
@store_option
@_json_option
@click.pass_context
def export_data(
    ctx: click.Context, forge: str, repo: RepoRef, out: Path, store: Path | None, as_json: bool
) -> None:
    """Write everything stored for one repository to a .tar.gz (JSONL and files)."""
    from trainer.data import export_repo

    settings, db, env_store = _open(ctx, store)
    found = export_repo(db, env_store, settings.data_dir, repo, out)
    db.dispose()
    if as_json:
        echo_json({"wrote": str(out), **found.summary()})
    else:
        click.echo(f"wrote {out}: {json.dumps(found.summary())}")


@data.command("delete")
@_forge
@_repo
@click.option("--yes", is_flag=True, help="Do not ask.")
@store_option
@actor_option
@_json_option
@click.pass_context
def delete_data(
    ctx: click.Context,
    forge: str,
    repo: RepoRef,
    yes: bool,
    store: Path | None,
    actor: str | None,
    as_json: bool,
) -> None:
    """Delete one repository's outcomes, trajectories, environments and job records, and
    revoke every model version trained on them (un-promoted and never served again: its
    line goes back to the base model, or to `ribbit model promote` of a clean one)."""
    from trainer.data import delete_repo, revoke_trained_on
    from trainer.store import TrainerStore
    from worker.model_choice import withdraw_version
    from worker.settings import as_worker_settings

    if not yes:
        # Under --json the question goes to stderr: stdout holds the JSON object alone.
        click.confirm(f"delete every stored record of {repo}?", abort=True, err=as_json)
    settings, db, env_store = _open(ctx, store)
    ref = repo
    facts: dict[str, object] = {}

    def run() -> str:
        served = {v.name for v in TrainerStore(db).versions() if v.state == "promoted"}
        found = delete_repo(db, env_store, settings.data_dir, ref)
        revoked = revoke_trained_on(db, ref, found.environments)
        for name in revoked:
            click.echo(f"revoked {name}: trained on {ref}'s data", err=as_json)
            if name in served:
                withdraw_version(as_worker_settings(settings).model, name)
        unknown = TrainerStore(db).versions_without_provenance()
        if unknown:
            # Registered by hand or before provenance was recorded: not revoked, not cleared.
            click.echo(
                f"what these versions trained on is not recorded; check them: {unknown}",
                err=as_json,
            )
        facts.update(deleted=found.summary(), revoked=revoked, not_recorded=unknown)
        return f"deleted {json.dumps(found.summary())}; revoked versions: {revoked or 'none'}"

    try:
        message = audited(db, cli_actor(actor), "delete-data", str(ref), run)
    finally:
        db.dispose()
    if as_json:
        echo_json({**facts, "message": message})
    else:
        click.echo(message)


@data.command("prune")
@store_option
@actor_option
@_json_option
@click.pass_context
def prune_data(ctx: click.Context, store: Path | None, actor: str | None, as_json: bool) -> None:
    """Delete data older than RIBBIT_TRAINING__RETENTION_DAYS (for a cron or beat job)."""
    from trainer.data import prune

    settings, db, env_store = _open(ctx, store)
    days = settings.training.retention_days
    pruned: list[dict[str, object]] = []
    if days is None:
        db.dispose()
        message = "RIBBIT_TRAINING__RETENTION_DAYS is unset: nothing expires"
    else:

        def run() -> str:
            done = prune(db, env_store, settings.data_dir, days)
            for d in done:
                pruned.append(d.summary())
                click.echo(f"pruned {json.dumps(d.summary())}", err=as_json)
            return f"pruned data older than {days} days from {len(done)} repositories"

        try:
            message = audited(db, cli_actor(actor), "prune-data", "*", run)
        finally:
            db.dispose()
    if as_json:
        # retention_days null: nothing expires (the setting is unset).
        echo_json({"retention_days": days, "pruned": pruned, "message": message})
    else:
        click.echo(message)


@data.command("visibility")
@_forge
@_repo
@click.option("--private/--public", "private", required=True, help="What the forge says.")
@actor_option
@_json_option
@click.pass_context
def visibility_data(
    ctx: click.Context, forge: str, repo: RepoRef, private: bool, actor: str | None, as_json: bool
) -> None:
    """Record whether a repository is private (unrecorded counts as private: its outcomes
    train no line that does not name it)."""
    from bot.model_lines import repo_line, set_visibility

    settings, db, _ = _open(ctx, None)
    ref = repo
    model_line: list[str | None] = []  # run()'s second result: the line ref trains, or None

    def run() -> str:
        set_visibility(db, ref, private=private)
        model_line.append(repo_line(db, settings.training, ref))
        return f"{ref}: {'private' if private else 'public'}; model line {model_line[0] or '-'}"

    try:
        message = audited(db, cli_actor(actor), "visibility", str(ref), run)
    finally:
        db.dispose()
    if as_json:
        # line null: the repository trains no model line (a private one no line names).
        facts = {"forge": ref.forge, "repo": ref.full_name, "private": private}
        echo_json({**facts, "line": model_line[0], "message": message})
    else:
        click.echo(message)
