"""`ribbit doctor`: each part checked, with what to do when it fails.

The worker-side parts (sandbox, model) are checked by functions worker/ registers
(worker.doctor, through the ribbit.doctor entry points), so bot/ names no worker module."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from importlib.metadata import EntryPoint, entry_points
from urllib.parse import urlsplit

from bot.doctor_check import Check
from bot.forges.base import RepoRef
from bot.settings import Settings, SettingsError, load_settings


def _guard(name: str, fn: Callable[[], Check | list[Check]]) -> list[Check]:
    try:
        result = fn()
    except Exception as exc:
        return [Check(name, "fail", f"{type(exc).__name__}: {exc}")]
    return result if isinstance(result, list) else [result]


def run_checks(
    settings: Settings | None = None,
    *,
    load: Callable[[], Settings] = load_settings,
    repos: Sequence[RepoRef] = (),
) -> list[Check]:
    """Every check; ``settings`` None: built by ``load`` (the CLI passes its loader, which
    builds the worker's sections too), a failure to build them being the first check.
    ``repos``: repositories whose permission each forge's credentials are checked on."""
    if settings is None:
        try:
            settings = load()
        except SettingsError as exc:
            return [Check("settings", "fail", str(exc))]
    s = settings
    checks = [Check("settings", "ok", f"data dir {s.data_dir}")]

    def database() -> Check:
        from bot.runtime import SchemaNotCurrent, open_database

        try:
            db = open_database(s)
        except SchemaNotCurrent as exc:
            return Check("database", "fail", str(exc))
        try:
            return Check("database", "ok", db.describe())
        finally:
            db.dispose()

    def broker() -> Check:
        from bot.web.health import check_broker

        check_broker(s.effective_broker_url)
        kind = "embedded (SQLite)" if s.uses_embedded_broker else "Redis/URL"
        return Check("broker", "ok", kind)

    def forges() -> list[Check]:
        from bot.web.webhooks import MISSING_SECRET, configured_forges

        out = []
        for forge, ok in configured_forges(s).items():
            out.append(
                Check(
                    f"{forge} webhooks",
                    "ok" if ok else "warn",
                    "secret configured" if ok else MISSING_SECRET[forge],
                )
            )
        return out

    checks += _guard("admins", functools.partial(_admins, s))
    checks += _guard("database", database)
    checks += _guard("broker", broker)
    checks += _guard("forges", forges)
    checks += _guard("forge credentials", functools.partial(_forge_checks, s, repos))
    checks += _guard("public url", functools.partial(public_url_check, s))
    for name, entry in sorted(registered_checks().items(), key=lambda kv: _order(kv[0])):
        checks += _guard(name, functools.partial(_run_registered, entry, s))
    return checks


def _admins(s: Settings) -> Check:
    named = sorted(s.admin_tokens)
    if not named and s.admin_token is None:
        return Check("admins", "ok", "dashboard off (no admin token)")
    if not named:
        # The token works, but every action is "admin" in the audit log.
        return Check(
            "admins",
            "warn",
            "one shared RIBBIT_ADMIN_TOKEN: the audit log cannot say who acted; name "
            "each admin with RIBBIT_ADMIN_TOKENS",
        )
    shared = " and the shared token (as 'admin')" if s.admin_token is not None else ""
    return Check("admins", "ok", f"named admins: {', '.join(named)}{shared}")


# The quickstart's steps that say how to give the forges and reviewers an https address,
# and how to make the link key, by their titles (a test holds them to the README).
REACHABLE_STEP = "Make the endpoint reachable"
SECRETS_STEP = "Secrets"


def public_url_check(s: Settings) -> Check:
    """The address draft PRs and status comments send reviewers to. Without it (or its
    link key) jobs still run but post no job-page link; over plain http to anything but
    this host, the forges' webhooks and the reviewers' sessions cross the network
    unencrypted. Read from the settings only: the proxy the quickstart sets up answers
    only /webhooks and /review, so there is no page of Ribbit's to ask for from here."""
    url = s.reviewer.public_url
    if url is None:
        return Check(
            "public url",
            "warn",
            "RIBBIT_REVIEWER__PUBLIC_URL is not set: PRs and status comments carry no link "
            f"to the job page; set it to the https address the forge reaches "
            f'(README quickstart, "{REACHABLE_STEP}")',
        )
    host = urlsplit(url).hostname or ""
    if url.startswith("http://") and host not in ("127.0.0.1", "localhost", "::1"):
        return Check(
            "public url",
            "warn",
            f"{url} is plain http: put a reverse proxy with TLS or a tunnel in front and "
            f'give its https address (README quickstart, "{REACHABLE_STEP}")',
        )
    if s.reviewer.link_secret is None:
        return Check(
            "public url",
            "warn",
            f"{url}, but RIBBIT_REVIEWER__LINK_SECRET is not set: no job-page link is "
            f'signed, so none is posted; generate one (README quickstart, "{SECRETS_STEP}")',
        )
    return Check("public url", "ok", f"job pages linked at {url.rstrip('/')}/review/jobs/...")


def _forge_checks(s: Settings, repos: Sequence[RepoRef]) -> list[Check]:
    from bot.forge_doctor import forge_checks

    return forge_checks(s, repos)


def _run_registered(entry: EntryPoint, settings: Settings) -> Check | list[Check]:
    check: Callable[[Settings], Check | list[Check]] = entry.load()
    return check(settings)


CHECKS_GROUP = "ribbit.doctor"
# The parts the worker registers, in the order an operator fixes them.
_ORDERED = ("sandbox", "model")


def _order(name: str) -> tuple[int, str]:
    return (_ORDERED.index(name) if name in _ORDERED else len(_ORDERED), name)


def registered_checks() -> dict[str, EntryPoint]:
    """Checks other packages register (pyproject's ribbit.doctor entry points): each is a
    callable taking Settings and returning a Check or a list of them."""
    return {ep.name: ep for ep in entry_points(group=CHECKS_GROUP)}
