"""GitLab REST v4, as much of it as python-gitlab calls for Ribbit's Forge operations.

Shapes follow GitLab's API documentation (issues, notes, merge requests,
members, statuses, repository files); only the fields a client or a webhook
consumer reads are filled, plus the identifiers GitLab always sends.
"""

from __future__ import annotations

import json
import re
import subprocess
import urllib.parse
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from werkzeug.wrappers import Response

from tests.forge.github_api import ApiError
from tests.forge.state import (
    GITLAB_LEVEL,
    ROLE_RANK,
    CommentRec,
    DiscussionRec,
    IssueRec,
    PullRec,
    RepoRec,
    StatusRec,
    new_id,
    now,
)

if TYPE_CHECKING:
    from tests.forge.server import Ctx, LocalForge

_DRAFT = re.compile(r"^\s*(\[draft\]|\(draft\)|draft:|draft\s-|draft\s|wip:)", re.IGNORECASE)
_STATES = {"pending", "running", "success", "failed", "canceled", "skipped"}


def ts(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def is_draft_title(title: str) -> bool:
    return bool(_DRAFT.match(title))


def _json(status: int, body: Any) -> Response:
    return Response(json.dumps(body), status=status, content_type="application/json")


def error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return Response(
        json.dumps({"message": message}),
        status=status,
        headers=headers or {},
        content_type="application/json",
    )


Handler = Callable[["Ctx", dict[str, str]], Response]


class Renderer:
    def __init__(self, forge: LocalForge) -> None:
        self.forge = forge

    @property
    def web(self) -> str:
        return self.forge.gitlab_url

    def user(self, login: str) -> dict[str, Any]:
        user = self.forge.users.get(login)
        return {
            "id": user.id if user else 0,
            "username": login,
            "name": login.title(),
            "state": "active",
            "locked": False,
            "avatar_url": None,
            "web_url": f"{self.web}/{login}",
        }

    def project(self, repo: RepoRec) -> dict[str, Any]:
        namespace = repo.owner
        return {
            "id": repo.id,
            "name": repo.name,
            "path": repo.name,
            "name_with_namespace": repo.full_name.replace("/", " / "),
            "path_with_namespace": repo.full_name,
            "description": None,
            "default_branch": repo.default_branch,
            "visibility": "private" if repo.private else "public",
            "http_url_to_repo": self.forge.git_url("gitlab", repo.full_name),
            "ssh_url_to_repo": f"git@127.0.0.1:{repo.full_name}.git",
            "web_url": f"{self.web}/{repo.full_name}",
            "archived": False,
            "namespace": {
                "id": new_id(),
                "name": namespace,
                "path": namespace,
                "kind": "group",
                "full_path": namespace,
                "web_url": f"{self.web}/groups/{namespace}",
            },
            "created_at": ts(now()),
            "last_activity_at": ts(now()),
        }

    def issue(self, repo: RepoRec, issue: IssueRec) -> dict[str, Any]:
        return {
            "id": issue.id,
            "iid": issue.number,
            "project_id": repo.id,
            "title": issue.title,
            "description": issue.body,
            "state": "opened" if issue.state == "open" else "closed",
            "created_at": ts(issue.created_at),
            "updated_at": ts(issue.updated_at),
            "closed_at": ts(issue.closed_at),
            "closed_by": None,
            "labels": list(issue.labels),
            "milestone": None,
            "assignees": [],
            "assignee": None,
            "type": "ISSUE",
            "author": self.user(issue.author),
            "user_notes_count": len(issue.comments),
            "web_url": f"{self.web}/{repo.full_name}/-/issues/{issue.number}",
            "confidential": False,
            "discussion_locked": None,
            "issue_type": "issue",
            "references": {"short": f"#{issue.number}", "full": f"{repo.full_name}#{issue.number}"},
        }

    def note(
        self,
        repo: RepoRec,
        noteable: IssueRec | PullRec,
        note: CommentRec,
        position: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        kind = "MergeRequest" if isinstance(noteable, PullRec) else "Issue"
        return {
            "id": note.id,
            "type": "DiffNote" if position else None,
            "body": note.body,
            "author": self.user(note.author),
            "created_at": ts(note.created_at),
            "updated_at": ts(note.updated_at),
            "system": False,
            "noteable_id": noteable.id,
            "noteable_type": kind,
            "noteable_iid": noteable.number,
            "project_id": repo.id,
            "resolvable": position is not None,
            "confidential": False,
            "internal": False,
            "position": position,
        }

    def merge_request(self, repo: RepoRec, mr: PullRec) -> dict[str, Any]:
        state = "merged" if mr.merged else ("opened" if mr.state == "open" else "closed")
        return {
            "id": mr.id,
            "iid": mr.number,
            "project_id": repo.id,
            "title": mr.title,
            "description": mr.body,
            "state": state,
            "draft": mr.draft,
            "work_in_progress": mr.draft,
            "created_at": ts(mr.created_at),
            "updated_at": ts(mr.updated_at),
            "merged_at": ts(mr.merged_at),
            "closed_at": ts(mr.closed_at) if not mr.merged else None,
            "merged_by": self.user(mr.merged_by) if mr.merged_by else None,
            "merge_user": self.user(mr.merged_by) if mr.merged_by else None,
            "closed_by": None,
            "target_branch": mr.base,
            "source_branch": mr.head,
            "source_project_id": repo.id,
            "target_project_id": repo.id,
            "author": self.user(mr.author),
            "assignees": [],
            "assignee": None,
            "reviewers": [self.user(r) for r in mr.requested_reviewers],
            "labels": list(mr.labels),
            "sha": mr.head_sha,
            "merge_commit_sha": mr.merge_commit_sha,
            "squash_commit_sha": None,
            "diff_refs": {
                "base_sha": mr.base_sha,
                "head_sha": mr.head_sha,
                "start_sha": mr.base_sha,
            },
            "detailed_merge_status": "mergeable" if mr.state == "open" else "not_open",
            "user_notes_count": len(mr.comments),
            "web_url": f"{self.web}/{repo.full_name}/-/merge_requests/{mr.number}",
            "references": {"short": f"!{mr.number}", "full": f"{repo.full_name}!{mr.number}"},
        }

    def status(self, repo: RepoRec, status: StatusRec) -> dict[str, Any]:
        return {
            "id": status.id,
            "sha": status.sha,
            "ref": None,
            "status": status.state,
            "name": status.context,
            "target_url": status.target_url,
            "description": status.description,
            "created_at": ts(status.created_at),
            "started_at": None,
            "finished_at": None,
            "allow_failure": False,
            "coverage": None,
            "author": self.user(status.creator),
        }


class GitLabApi:
    def __init__(self, forge: LocalForge) -> None:
        self.forge = forge
        self.r = Renderer(forge)
        p = r"/projects/(?P<project>[^/]+)"
        self.routes: list[tuple[str, str, Handler]] = [
            ("GET", r"/user", self.get_user),
            ("GET", r"/users", self.list_users),
            ("GET", p, self.get_project),
            ("GET", p + r"/issues/(?P<iid>\d+)", self.get_issue),
            ("GET", p + r"/issues/(?P<iid>\d+)/notes", self.list_issue_notes),
            ("POST", p + r"/issues/(?P<iid>\d+)/notes", self.create_issue_note),
            ("PUT", p + r"/issues/(?P<iid>\d+)/notes/(?P<nid>\d+)", self.edit_issue_note),
            ("GET", p + r"/members/all/(?P<uid>\d+)", self.get_member),
            ("GET", p + r"/labels/(?P<label>[^/]+)", self.get_label),
            ("POST", p + r"/labels", self.create_label),
            ("GET", p + r"/repository/files/(?P<path>[^/]+)/raw", self.raw_file),
            ("GET", p + r"/merge_requests", self.list_mrs),
            ("POST", p + r"/merge_requests", self.create_mr),
            ("GET", p + r"/merge_requests/(?P<iid>\d+)", self.get_mr),
            ("PUT", p + r"/merge_requests/(?P<iid>\d+)", self.update_mr),
            ("GET", p + r"/merge_requests/(?P<iid>\d+)/approvals", self.approvals),
            ("GET", p + r"/merge_requests/(?P<iid>\d+)/reviewers", self.reviewers),
            ("GET", p + r"/merge_requests/(?P<iid>\d+)/notes", self.list_mr_notes),
            ("GET", p + r"/merge_requests/(?P<iid>\d+)/diffs", self.diffs),
            ("GET", p + r"/merge_requests/(?P<iid>\d+)/discussions", self.list_discussions),
            ("POST", p + r"/merge_requests/(?P<iid>\d+)/discussions", self.create_discussion),
            ("POST", p + r"/statuses/(?P<sha>[0-9a-f]{40})", self.create_status),
            ("GET", p + r"/repository/commits/(?P<sha>[0-9a-f]{40})/statuses", self.list_statuses),
        ]

    # -- helpers ------------------------------------------------------------

    def _repo(self, ctx: Ctx, m: dict[str, str], need: str = "read") -> RepoRec:
        full = urllib.parse.unquote(m["project"])
        user = ctx.require_user()
        repo = self.forge.repos.get(("gitlab", full))
        if repo is None:
            repo = next(
                (r for r in self.forge.repos.values() if r.forge == "gitlab" and str(r.id) == full),
                None,
            )
        if repo is None:
            raise ApiError(404, "404 Project Not Found")
        rank = ROLE_RANK[repo.role_of(user.login)]
        if rank < ROLE_RANK["read"] and repo.private:
            raise ApiError(404, "404 Project Not Found")
        if rank < ROLE_RANK[need]:
            raise ApiError(403, "403 Forbidden")
        return repo

    @staticmethod
    def _body(ctx: Ctx) -> dict[str, Any]:
        if ctx.request.mimetype == "application/json":
            try:
                data = json.loads(ctx.request.get_data() or b"{}")
            except ValueError:
                raise ApiError(400, "400 Bad request - invalid JSON") from None
            return data if isinstance(data, dict) else {}
        return dict(ctx.request.form)

    @staticmethod
    def _issue(repo: RepoRec, iid: str) -> IssueRec:
        issue = repo.issues.get(int(iid))
        if issue is None:
            raise ApiError(404, "404 Not found")
        return issue

    def _mr(self, repo: RepoRec, iid: str) -> PullRec:
        mr = repo.pulls.get(int(iid))
        if mr is None:
            raise ApiError(404, "404 Not found")
        self.forge.refresh_pull(repo, mr)
        return mr

    # -- users, projects, members ---------------------------------------------

    def get_user(self, ctx: Ctx, m: dict[str, str]) -> Response:
        return _json(200, self.r.user(ctx.require_user().login))

    def list_users(self, ctx: Ctx, m: dict[str, str]) -> Response:
        ctx.require_user()
        wanted = ctx.request.args.get("username")
        users = [
            self.r.user(login)
            for login in self.forge.users
            if wanted is None or login.lower() == wanted.lower()
        ]
        return _json(200, users)

    def get_project(self, ctx: Ctx, m: dict[str, str]) -> Response:
        return _json(200, self.r.project(self._repo(ctx, m)))

    def get_member(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m)
        user = next((u for u in self.forge.users.values() if u.id == int(m["uid"])), None)
        if user is None or repo.role_of(user.login) == "none":
            raise ApiError(404, "404 Not found")
        data = self.r.user(user.login)
        data.update(
            access_level=GITLAB_LEVEL[repo.role_of(user.login)],
            expires_at=None,
            membership_state="active",
        )
        return _json(200, data)

    def _label(self, repo: RepoRec, name: str) -> dict[str, Any]:
        return {
            "id": repo.label_id(name),
            "name": name,
            "color": repo.labels[name],
            "text_color": "#FFFFFF",
            "description": None,
            "open_issues_count": 0,
            "closed_issues_count": 0,
            "open_merge_requests_count": 0,
            "subscribed": False,
            "priority": None,
            "is_project_label": True,
        }

    def get_label(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m)
        name = urllib.parse.unquote(m["label"])
        if name not in repo.labels:
            raise ApiError(404, "404 Label Not Found")
        return _json(200, self._label(repo, name))

    def create_label(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m, need="triage")  # GitLab: Reporter and above
        data = self._body(ctx)
        name = str(data.get("name") or "")
        if not name or not data.get("color"):
            raise ApiError(400, "400 Bad request - name, color are missing")
        with self.forge.lock:
            if name in repo.labels:
                raise ApiError(409, "Label already exists")
            repo.labels[name] = str(data["color"])
        return _json(201, self._label(repo, name))

    # -- issues and notes -----------------------------------------------------

    def get_issue(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m)
        return _json(200, self.r.issue(repo, self._issue(repo, m["iid"])))

    def list_issue_notes(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m)
        issue = self._issue(repo, m["iid"])
        notes = [self.r.note(repo, issue, c) for c in issue.comments]
        if ctx.request.args.get("sort", "desc") == "desc":
            notes.reverse()
        return _json(200, notes)

    def create_issue_note(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m)
        issue = self._issue(repo, m["iid"])
        body = self._body(ctx).get("body")
        if not isinstance(body, str) or not body:
            raise ApiError(400, "400 Bad request - body is missing")
        note = self.forge.add_comment_record(issue, ctx.require_user().login, body)
        return _json(201, self.r.note(repo, issue, note))

    def edit_issue_note(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m)
        issue = self._issue(repo, m["iid"])
        note = next((c for c in issue.comments if c.id == int(m["nid"])), None)
        if note is None:
            raise ApiError(404, "404 Note Not Found")
        if note.author != ctx.require_user().login:
            raise ApiError(403, "403 Forbidden")
        body = self._body(ctx).get("body")
        if not isinstance(body, str):
            raise ApiError(400, "400 Bad request - body is missing")
        self.forge.edit_comment_record(note, body)
        return _json(200, self.r.note(repo, issue, note))

    # -- files ----------------------------------------------------------------

    def raw_file(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m)
        path = urllib.parse.unquote(m["path"])
        ref = ctx.request.args.get("ref") or repo.default_branch
        if ".." in path.split("/") or ref.startswith("-"):
            raise ApiError(404, "404 File Not Found")
        content = repo.file_at(ref, path)
        if content is None:
            raise ApiError(404, "404 File Not Found")
        return Response(content, status=200, content_type="text/plain; charset=utf-8")

    # -- merge requests --------------------------------------------------------

    def list_mrs(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m)
        args = ctx.request.args
        state = args.get("state", "all")
        found = []
        for mr in sorted(repo.pulls.values(), key=lambda p: -p.number):
            self.forge.refresh_pull(repo, mr)
            data = self.r.merge_request(repo, mr)
            if state != "all" and data["state"] != state:
                continue
            if args.get("source_branch") and mr.head != args["source_branch"]:
                continue
            found.append(data)
        return _json(200, found)

    def create_mr(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m, "write")
        data = self._body(ctx)
        head, base = str(data.get("source_branch", "")), str(data.get("target_branch", ""))
        title = str(data.get("title") or "")
        if not title or repo.branch_sha(head) is None or repo.branch_sha(base) is None:
            raise ApiError(400, "400 Bad request - invalid source or target branch")
        for mr in repo.pulls.values():
            if mr.head == head and mr.base == base and mr.state == "open":
                raise ApiError(
                    409,
                    f"Another open merge request already exists for this "
                    f"source branch: !{mr.number}",
                )
        mr = self.forge.add_pull_record(
            repo,
            ctx.require_user().login,
            title,
            str(data.get("description") or ""),
            head,
            base,
            draft=is_draft_title(title),
        )
        labels = data.get("labels") or ""
        names = labels if isinstance(labels, list) else str(labels).split(",")
        mr.labels = [n.strip() for n in names if n.strip()]
        for uid in data.get("reviewer_ids") or []:
            user = next((u for u in self.forge.users.values() if u.id == int(uid)), None)
            # GitLab drops reviewers who are not members of the project.
            if (
                user is not None
                and repo.role_of(user.login) != "none"
                and user.login not in mr.requested_reviewers
            ):
                mr.requested_reviewers.append(user.login)
        return _json(201, self.r.merge_request(repo, mr))

    def get_mr(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m)
        return _json(200, self.r.merge_request(repo, self._mr(repo, m["iid"])))

    def update_mr(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m, "write")
        mr = self._mr(repo, m["iid"])
        data = self._body(ctx)
        if "description" in data:
            mr.body = str(data["description"] or "")
        if data.get("title"):
            mr.title = str(data["title"])
        return _json(200, self.r.merge_request(repo, mr))

    def approvals(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m)
        mr = self._mr(repo, m["iid"])
        approved = [r.author for r in mr.reviews if r.state == "APPROVED"]
        return _json(
            200,
            {
                "id": mr.id,
                "iid": mr.number,
                "project_id": repo.id,
                "approved": bool(approved),
                "approvals_required": 0,
                "approvals_left": 0,
                "approved_by": [{"user": self.r.user(a)} for a in approved],
            },
        )

    def reviewers(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m)
        mr = self._mr(repo, m["iid"])
        latest: dict[str, str] = {}
        for review in mr.reviews:
            latest[review.author] = {
                "APPROVED": "approved",
                "CHANGES_REQUESTED": "requested_changes",
                "COMMENTED": "reviewed",
            }[review.state]
        names = list(dict.fromkeys([*mr.requested_reviewers, *latest]))
        return _json(
            200,
            [
                {
                    "user": self.r.user(n),
                    "state": latest.get(n, "unreviewed"),
                    "created_at": ts(mr.created_at),
                }
                for n in names
            ],
        )

    def list_mr_notes(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m)
        mr = self._mr(repo, m["iid"])
        notes = [self.r.note(repo, mr, c) for c in mr.comments]
        for rc in mr.review_comments:
            comment = CommentRec(
                id=rc.id,
                author=rc.author,
                body=rc.body,
                created_at=rc.created_at,
                updated_at=rc.created_at,
            )
            notes.append(
                self.r.note(
                    repo,
                    mr,
                    comment,
                    position={
                        "base_sha": mr.base_sha,
                        "head_sha": rc.commit_id,
                        "start_sha": mr.base_sha,
                        "position_type": "text",
                        "new_path": rc.path,
                        "old_path": rc.path,
                        "new_line": rc.line,
                        "old_line": None,
                    },
                )
            )
        notes.sort(key=lambda n: (n["created_at"], n["id"]))
        if ctx.request.args.get("sort", "desc") == "desc":
            notes.reverse()
        return _json(200, notes)

    def diffs(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m)
        mr = self._mr(repo, m["iid"])
        spec = f"{mr.base_sha}...{mr.head_sha}"
        raw = repo.git("diff", "--raw", "-M", "-z", "--no-abbrev", spec)
        fields = raw.split("\0")
        entries = []
        index = 0
        while index < len(fields) - 1:
            meta = fields[index].lstrip(":").split()
            status = meta[4]
            if status.startswith(("R", "C")):
                old, new = fields[index + 1], fields[index + 2]
                index += 3
            else:
                old = new = fields[index + 1]
                index += 2
            try:
                text = repo.git("diff", "-M", "--no-color", spec, "--", *{old, new})
            except subprocess.CalledProcessError:
                text = ""
            hunk_at = text.find("\n@@")
            body = text[hunk_at + 1 :] if hunk_at >= 0 else ""
            entries.append(
                {
                    "old_path": old,
                    "new_path": new,
                    "a_mode": meta[0],
                    "b_mode": meta[1],
                    "new_file": status == "A",
                    "renamed_file": status.startswith("R"),
                    "deleted_file": status == "D",
                    "generated_file": False,
                    "diff": body,
                }
            )
        return _json(200, entries)

    # -- discussions -----------------------------------------------------------

    def _discussion(self, repo: RepoRec, mr: PullRec, d: DiscussionRec) -> dict[str, Any]:
        return {
            "id": d.id,
            "individual_note": d.position is None,
            "notes": [self.r.note(repo, mr, d.note, d.position)],
        }

    def list_discussions(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m)
        mr = self._mr(repo, m["iid"])
        return _json(200, [self._discussion(repo, mr, d) for d in mr.discussions])

    def create_discussion(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m, "read")
        mr = self._mr(repo, m["iid"])
        data = self._body(ctx)
        body = data.get("body")
        if not isinstance(body, str) or not body.strip():
            raise ApiError(400, "400 Bad request - body is missing")
        position = data.get("position")
        if position is not None:
            self._check_position(repo, mr, position)
        at = now()
        note = CommentRec(
            id=new_id(), author=ctx.require_user().login, body=body, created_at=at, updated_at=at
        )
        discussion = DiscussionRec(id=uuid.uuid4().hex + "0" * 8, note=note, position=position)
        mr.discussions.append(discussion)
        return _json(201, self._discussion(repo, mr, discussion))

    @staticmethod
    def _check_position(repo: RepoRec, mr: PullRec, position: Any) -> None:
        """GitLab's rules for a diff note: the MR's current diff refs, and a line the
        diff shows (an added line by new_line alone); anything else is a 400."""
        if not isinstance(position, dict) or position.get("position_type") != "text":
            raise ApiError(400, "400 Bad request - position is invalid")
        refs = (mr.base_sha, mr.base_sha, mr.head_sha)
        given = (position.get("base_sha"), position.get("start_sha"), position.get("head_sha"))
        if given != refs:
            raise ApiError(400, '400 Bad request - Note {:line_code=>["can\'t be blank"]}')
        path, line = position.get("new_path"), position.get("new_line")
        if not isinstance(path, str) or not isinstance(line, int):
            raise ApiError(400, '400 Bad request - Note {:line_code=>["can\'t be blank"]}')
        if line not in _added_lines(
            repo.git("diff", "--no-color", f"{refs[0]}...{refs[2]}", "--", path)
        ):
            raise ApiError(
                400, '400 Bad request - Note {:line_code=>["must be a valid line code"]}'
            )

    # -- statuses --------------------------------------------------------------

    def create_status(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m, "write")
        data = self._body(ctx)
        state = data.get("state")
        if state not in _STATES:
            raise ApiError(400, "400 Bad request - state does not have a valid value")
        try:
            repo.git("cat-file", "-e", f"{m['sha']}^{{commit}}")
        except subprocess.CalledProcessError:
            raise ApiError(404, "404 Commit Not Found") from None
        status = StatusRec(
            id=new_id(),
            sha=m["sha"],
            state=str(state),
            context=str(data.get("name") or data.get("context") or "default"),
            description=str(data.get("description") or ""),
            target_url=data.get("target_url"),
            creator=ctx.require_user().login,
            created_at=now(),
        )
        repo.statuses.append(status)
        return _json(201, self.r.status(repo, status))

    def list_statuses(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m)
        return _json(200, [self.r.status(repo, s) for s in repo.statuses if s.sha == m["sha"]])


_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")


def _added_lines(diff: str) -> set[int]:
    """New-side numbers of the lines a one-file diff adds."""
    added: set[int] = set()
    line = 0
    in_hunk = False
    for text in diff.splitlines():
        match = _HUNK.match(text)
        if match:
            line, in_hunk = int(match[1]), True
        elif not in_hunk or text.startswith("\\"):
            continue
        elif text.startswith("+"):
            added.add(line)
            line += 1
        elif text.startswith(" "):
            line += 1
    return added
