"""Noise control: a repository whose maintainers keep closing the bot's pull requests is
paused, and they are told why, with the numbers, once.

After each recorded outcome of a bot PR, the repository's merge rate is taken over the
window (``RIBBIT_NOISE__WINDOW_DAYS``): merged / (merged + closed) bot PRs decided in it.
With at least ``min_outcomes`` of them and a rate below ``min_merge_rate`` the repository
is paused through the store's pause (as ``ribbit pause --repo`` does) and a NoisePause
row (bot/store/noise.py) records the numbers. Only outcomes decided after the
repository's last automatic pause count: an admin who resumes it gives the bot a fresh
start instead of a pause at the next closed PR. The message (a comment on the issue the
bot was asked on, and the notification webhook when one is set) is sent after the pause
is committed; a step that failed is retried on the next check, and
``commented_at``/``notified_at`` make it one of each per pause.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial

from bot.forges import ForgeFactory
from bot.forges.base import forge_name
from bot.settings import Settings
from bot.store.jobs import JobStore
from bot.store.noise import NoisePause, NoiseStore, ToldColumn
from bot.store.outcomes import OutcomeStore
from bot.store.tables import utcnow

log = logging.getLogger(__name__)


def pause_text(pause: NoisePause, settings: Settings) -> str:
    rate = pause.merged / max(pause.merged + pause.closed, 1)
    days = settings.noise.window_days
    return (
        f"Ribbit has paused itself on `{pause.repo}`: of its last "
        f"{pause.merged + pause.closed} pull requests decided here in the last {days} days, "
        f"{pause.merged} were merged and {pause.closed} closed without merging "
        f"({rate:.0%} merged), below the {settings.noise.min_merge_rate:.0%} this "
        "deployment asks for (`RIBBIT_NOISE__MIN_MERGE_RATE`). No new work starts here "
        "until an admin resumes it (`ribbit resume --repo "
        f"{pause.forge}:{pause.repo}` or the dashboard); labelled issues are kept meanwhile."
    )


def check_repository(
    store: JobStore,
    settings: Settings,
    forges: ForgeFactory,
    forge: str,
    repo: str,
    *,
    issue_number: int | None = None,
    installation_id: int | None = None,
    now: datetime | None = None,
) -> NoisePause | None:
    """Pause ``repo`` if its bot PRs' merge rate is below the threshold; returns the new
    pause (None when nothing changed). Tells maintainers about any pause not told yet."""
    cfg = settings.noise
    if cfg.min_merge_rate <= 0:
        return None
    now = now or utcnow()
    created: NoisePause | None = None
    with store.db.session() as session:
        if not store.is_paused(session, forge, repo):
            last = NoiseStore.last_paused_at(session, forge, repo)
            since = now - timedelta(days=cfg.window_days)
            if last is not None:
                since = max(since, last)
            rate = OutcomeStore.bot_merge_rate(session, forge, repo, since)
            if rate.decided >= cfg.min_outcomes and rate.rate < cfg.min_merge_rate:
                store.repository(session, forge, repo).paused = True
                created = NoiseStore.record(
                    session,
                    NoisePause(
                        forge=forge,
                        repo=repo,
                        paused_at=now,
                        window_start=since,
                        merged=rate.merged,
                        closed=rate.closed,
                        issue_number=issue_number,
                        installation_id=installation_id,
                    ),
                )
                log.warning(
                    "paused %s:%s: %d of %d bot PRs merged", forge, repo, rate.merged, rate.decided
                )
    _tell_untold(store, settings, forges, forge, repo)
    return created


def _tell_untold(
    store: JobStore, settings: Settings, forges: ForgeFactory, forge: str, repo: str
) -> None:
    # Read, then talk to the forge with no transaction open (SQLite would hold its write
    # lock through the network calls), then record what was done, step by step, so a
    # comment that went out is never posted again because the webhook failed.
    for pause in NoiseStore(store.db).untold(forge, repo):
        text = pause_text(pause, settings)
        if pause.commented_at is None:
            _step(store, pause, "commented_at", partial(_comment, pause, forges, text))
        if pause.notified_at is None:
            _step(store, pause, "notified_at", partial(_notify, settings, text))


def _step(
    store: JobStore, pause: NoisePause, column: ToldColumn, action: Callable[[], None]
) -> None:
    try:
        action()
    except Exception as exc:  # the forge or the receiver is down: the next check retries
        log.warning("could not tell %s:%s about its pause: %s", pause.forge, pause.repo, exc)
        return
    NoiseStore(store.db).mark_told(pause.id, column)


def _comment(pause: NoisePause, forges: ForgeFactory, text: str) -> None:
    """On the issue the bot was last asked on: where its maintainers are."""
    if pause.issue_number is None:
        return
    from bot.forges.base import IssueRef, RepoRef

    ref = RepoRef(forge_name(pause.forge), pause.repo)
    forge = forges(ref.forge, installation_id=pause.installation_id)
    forge.post_comment(IssueRef(ref, pause.issue_number), text)


def _notify(settings: Settings, text: str) -> None:
    if settings.notify.webhook_url is not None:
        from bot.notify import post

        post(settings.notify.webhook_url.get_secret_value(), text)
