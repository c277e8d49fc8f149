"""Re-judging Ribbit's open draft PRs that an older judge passed (``ribbit prs rejudge``).

A draft opened before the verdict had levels says "gates passed" and ``Fixes #N`` on the
old judge's word, which took "no test failed" for evidence: merging it may close a bug
no test shows fixed. Each open draft whose job's verdict was not made by today's judge
(bot/store/records/gate_report.py JUDGE_VERSION) and is not verified is re-labelled as an
unverified draft's body reads (worker/pipelines/publish.py :func:`as_unverified`): its
own closing line becomes ``Refs #N`` and the "Not verified" warning opens it; the commit
status Ribbit set on its own head becomes ``failure`` "Not verified", as an unverified
draft's is (the check run it published then stays as it was).

There is no job kind that runs the gates again on a PR (bot/store/kinds.py), so nothing
is queued: a human, or a revision, re-judges it for real. Re-labelling is idempotent (a
body that already reads so is not written), each write is audited with its actor, and a
dry run only says what it would do.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from bot.cli_audit import audited
from bot.forges import ForgeFactory
from bot.forges.base import CommitStatus, RepoRef
from bot.store.db import Database
from bot.store.pr_verdicts import PrVerdict, pr_verdicts
from bot.store.records.gate_report import JUDGE_VERSION, Verdict
from worker.pipelines.publish import as_unverified

AUDIT_ACTION = "rejudge"


class Action(StrEnum):
    RELABELLED = "relabelled as unverified"
    WOULD_RELABEL = "would relabel as unverified (dry run)"
    ALREADY = "already reads as unverified"
    VERIFIED = "verified: left as it is"
    REFUSED = "refused by a judge with levels (no closing keyword): left as it is"
    NOT_OPEN_DRAFT = "not an open draft: left as it is"
    NO_ISSUE = "names no issue: left as it is"


@dataclass(frozen=True)
class Rejudged:
    pr: PrVerdict
    action: Action

    def to_json(self) -> dict[str, object]:
        """For `ribbit prs rejudge --json`: ``action`` is the Action's stable name, its
        sentence (which may be reworded) is ``says``."""
        return {
            "forge": self.pr.forge,
            "repo": self.pr.repo,
            "pr": self.pr.pr_number,
            "job_id": self.pr.job_id,
            "judge": self.pr.judge,
            "action": self.action.name.lower(),
            "says": self.action.value,
        }


def judged_by_older(
    db: Database, repo: RepoRef | None = None, forge: str | None = None
) -> list[PrVerdict]:
    """Ribbit's PRs (``repo``'s only, or ``forge``'s, if given) whose latest agent job's
    verdict is not today's judge's, oldest first."""
    if repo is not None:
        found = pr_verdicts(db, repo.full_name, repo.forge)
    else:
        found = pr_verdicts(db, forge=forge)
    return [pr for pr in found if pr.judge != JUDGE_VERSION]


def rejudge(
    db: Database,
    forges: ForgeFactory,
    actor: str,
    *,
    repo: RepoRef | None = None,
    forge: str | None = None,
    dry_run: bool,
) -> list[Rejudged]:
    """Re-label each open draft an older judge passed without a verified verdict."""
    older = judged_by_older(db, repo, forge)
    return [_rejudge_one(db, forges, actor, pr, dry_run=dry_run) for pr in older]


def _rejudge_one(
    db: Database, forges: ForgeFactory, actor: str, judged: PrVerdict, *, dry_run: bool
) -> Rejudged:
    if judged.verdict is Verdict.VERIFIED:
        return Rejudged(judged, Action.VERIFIED)
    if judged.verdict is Verdict.REFUSED:  # its draft already names the issue with Refs
        return Rejudged(judged, Action.REFUSED)
    if judged.issue is None:
        return Rejudged(judged, Action.NO_ISSUE)
    forge = forges(judged.forge, installation_id=judged.installation_id)
    ref = judged.ref
    pr = forge.get_pull_request(ref)
    if pr.state != "open" or not pr.draft:
        return Rejudged(judged, Action.NOT_OPEN_DRAFT)
    level = judged.verdict or Verdict.BEFORE_EVIDENCE
    body = as_unverified(pr.body, judged.issue, level)
    if body == pr.body:
        return Rejudged(judged, Action.ALREADY)
    if dry_run:
        return Rejudged(judged, Action.WOULD_RELABEL)

    # Ribbit's commit status on its own head said success on the old judge's word; on a
    # commit someone pushed since, there is no status of Ribbit's to take back.
    own_head = pr.head_sha == judged.head_sha

    def relabel() -> str:
        # The status first, the body last: a re-labelled body is what says it is done, so
        # a run that stops between the two does both again, never neither.
        if own_head:
            status = CommitStatus("failure", description=f"Not verified: {level.word}")
            forge.set_commit_status(ref.repo, pr.head_sha, status)
        forge.update_pull_request_body(ref, body)
        return (
            f"job {judged.job_id} ({level.value}, judge {judged.judge or 'unrecorded'}): "
            f"body re-labelled unverified, Refs #{judged.issue}"
            + (f"; status failure on {pr.head_sha[:12]}" if own_head else "")
        )

    audited(db, actor, AUDIT_ACTION, str(judged.ref), relabel)
    return Rejudged(judged, Action.RELABELLED)
