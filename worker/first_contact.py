"""A repository's first job makes sure Ribbit's trigger label exists there (issue #36:
nobody creates it by hand before they can ask for a fix). One job per repository asks the
forge (the store's claim); a refusal is logged and never fails the job it rode on."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from bot.forges.base import ForgeError, ForgeUnavailable

if TYPE_CHECKING:
    from worker.jobs import JobContext

log = logging.getLogger(__name__)


def ensure_trigger_label(ctx: JobContext) -> None:
    """Create the deployment's trigger label (RIBBIT_LABEL) on the job's repository if it
    has none, the first time a job runs there."""
    repo = ctx.job.repo_ref
    if not ctx.store.claim_label_check(repo.forge, repo.full_name):
        return
    label = ctx.settings.label
    try:
        forge = ctx.forges(repo.forge, installation_id=ctx.job.installation_id)
        created = forge.ensure_label(repo, label)
    except ForgeUnavailable as exc:
        # It may pass later: the claim goes back, and the repository's next job asks again.
        ctx.store.release_label_check(repo.forge, repo.full_name)
        log.warning("could not check the label %r on %s, next job retries: %s", label, repo, exc)
        return
    except ForgeError as exc:
        # A refusal (no permission to manage labels) does not pass by asking again:
        # said once, for the operator to create the label or grant the permission.
        log.warning("could not create the label %r on %s: %s", label, repo, exc)
        return
    if created:
        log.info("created the label %r on %s", label, repo)
