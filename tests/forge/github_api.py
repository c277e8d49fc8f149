"""GitHub REST v3, as much of it as PyGithub calls for Ribbit's Forge operations.

Answers are built from GitHub's own published examples (``openapi-subset.json``)
with the local state filled in, so they carry every field the real API does;
``tests/integration/test_forge_openapi.py`` checks them against the schemas.
"""

from __future__ import annotations

import base64
import copy
import json
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jwt
from werkzeug.wrappers import Response

from tests.forge.state import (
    ROLE_RANK,
    AnnotationRec,
    CheckRunRec,
    CommentRec,
    IssueRec,
    PullRec,
    RepoRec,
    ReviewCommentRec,
    ReviewRec,
    StatusRec,
    User,
    new_id,
    now,
)

if TYPE_CHECKING:
    from tests.forge.server import Ctx, LocalForge

SUBSET = Path(__file__).with_name("openapi-subset.json")


@cache
def subset() -> dict[str, Any]:
    return json.loads(SUBSET.read_text())


def ts(value: datetime | None) -> str | None:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if value else None


def _replace(node: Any, pairs: list[tuple[str, str]]) -> Any:
    if isinstance(node, str):
        for old, new in pairs:
            node = node.replace(old, new)
        return node
    if isinstance(node, list):
        return [_replace(item, pairs) for item in node]
    if isinstance(node, dict):
        return {key: _replace(value, pairs) for key, value in node.items()}
    return node


class ApiError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


class Renderer:
    """Turns local state into GitHub JSON."""

    def __init__(self, forge: LocalForge) -> None:
        self.forge = forge

    @property
    def api(self) -> str:
        return self.forge.github_api_url

    @property
    def web(self) -> str:
        return f"{self.forge.url}/github"

    def _tpl(self, name: str, pairs: list[tuple[str, str]]) -> dict[str, Any]:
        base = copy.deepcopy(subset()["examples"][name])
        return dict(
            _replace(
                base,
                [("https://api.github.com", self.api), ("https://github.com", self.web), *pairs],
            )
        )

    def user(self, login: str) -> dict[str, Any]:
        user = self.forge.users.get(login)
        data = self._tpl("issue", [])["user"]
        data = _replace(data, [("octocat", login)])
        data.update(
            login=login,
            id=user.id if user else 0,
            node_id=f"U_{user.id if user else 0}",
            type=user.kind if user else "User",
            site_admin=False,
            gravatar_id="",
        )
        return dict(data)

    def repo(self, repo: RepoRec, viewer: str | None = None) -> dict[str, Any]:
        data = self._tpl(
            "repository", [("octocat/Hello-World", repo.full_name), ("Hello-World", repo.name)]
        )
        for key in (
            "organization",
            "parent",
            "source",
            "template_repository",
            "security_and_analysis",
            "code_of_conduct",
        ):
            data.pop(key, None)
        role = ROLE_RANK[repo.role_of(viewer)] if viewer else 0
        data.update(
            id=repo.id,
            node_id=f"R_{repo.id}",
            name=repo.name,
            full_name=repo.full_name,
            owner=self.user(repo.owner),
            private=repo.private,
            visibility="private" if repo.private else "public",
            default_branch=repo.default_branch,
            clone_url=self.forge.git_url("github", repo.full_name),
            html_url=f"{self.web}/{repo.full_name}",
            url=f"{self.api}/repos/{repo.full_name}",
            fork=False,
            archived=False,
            disabled=False,
            license=None,
            language=None,
            custom_properties={},
            web_commit_signoff_required=False,
            open_issues_count=sum(1 for i in repo.issues.values() if i.state == "open"),
            permissions={
                "admin": role >= 5,
                "maintain": role >= 4,
                "push": role >= 3,
                "triage": role >= 2,
                "pull": role >= 1,
            },
        )
        return data

    def label(self, repo: RepoRec, name: str) -> dict[str, Any]:
        data = self._tpl("label", [("octocat/Hello-World", repo.full_name)])
        label_id = repo.label_id(name)
        data.update(
            id=label_id,
            node_id=f"LA_{label_id}",
            name=name,
            default=False,
            description=None,
            color=repo.labels.get(name, "ededed"),
            url=f"{self.api}/repos/{repo.full_name}/labels/{name}",
        )
        return data

    def issue(self, repo: RepoRec, issue: IssueRec | PullRec) -> dict[str, Any]:
        data = self._tpl("issue", [("octocat/Hello-World", repo.full_name)])
        for key in ("pinned_comment", "pull_request", "closed_by", "state_reason"):
            data.pop(key, None)
        base = f"{self.api}/repos/{repo.full_name}/issues/{issue.number}"
        data.update(
            id=issue.id,
            node_id=f"I_{issue.id}",
            number=issue.number,
            title=issue.title,
            body=issue.body,
            user=self.user(issue.author),
            state=issue.state,
            labels=[self.label(repo, name) for name in issue.labels],
            assignee=None,
            assignees=[],
            milestone=None,
            locked=False,
            active_lock_reason=None,
            comments=len(issue.comments),
            created_at=ts(issue.created_at),
            updated_at=ts(issue.updated_at),
            closed_at=ts(issue.closed_at),
            url=base,
            comments_url=f"{base}/comments",
            events_url=f"{base}/events",
            labels_url=f"{base}/labels{{/name}}",
            repository_url=f"{self.api}/repos/{repo.full_name}",
            html_url=f"{self.web}/{repo.full_name}/issues/{issue.number}",
            author_association=self.association(repo, issue.author),
            draft=isinstance(issue, PullRec) and issue.draft,
            reactions={
                "url": f"{base}/reactions",
                "total_count": 0,
                "+1": 0,
                "-1": 0,
                "laugh": 0,
                "hooray": 0,
                "confused": 0,
                "heart": 0,
                "rocket": 0,
                "eyes": 0,
            },
        )
        if isinstance(issue, PullRec):
            pulls = f"{self.api}/repos/{repo.full_name}/pulls/{issue.number}"
            data["pull_request"] = {
                "url": pulls,
                "html_url": f"{self.web}/pull/{issue.number}",
                "diff_url": f"{pulls}.diff",
                "patch_url": f"{pulls}.patch",
                "merged_at": ts(issue.merged_at),
            }
        return data

    def association(self, repo: RepoRec, login: str) -> str:
        role = repo.role_of(login)
        if login == repo.owner or role == "admin":
            return "OWNER"
        return "COLLABORATOR" if ROLE_RANK[role] >= ROLE_RANK["write"] else "NONE"

    def comment(self, repo: RepoRec, number: int, comment: CommentRec) -> dict[str, Any]:
        data = self._tpl("issue-comment", [("octocat/Hello-World", repo.full_name)])
        for key in ("pin", "minimized", "reactions", "performed_via_github_app"):
            data.pop(key, None)
        data.update(
            id=comment.id,
            node_id=f"IC_{comment.id}",
            body=comment.body,
            user=self.user(comment.author),
            created_at=ts(comment.created_at),
            updated_at=ts(comment.updated_at),
            url=f"{self.api}/repos/{repo.full_name}/issues/comments/{comment.id}",
            html_url=f"{self.web}/{repo.full_name}/issues/{number}#issuecomment-{comment.id}",
            issue_url=f"{self.api}/repos/{repo.full_name}/issues/{number}",
            author_association=self.association(repo, comment.author),
        )
        return data

    def _branch(self, repo: RepoRec, ref: str, sha: str) -> dict[str, Any]:
        return {
            "label": f"{repo.owner}:{ref}",
            "ref": ref,
            "sha": sha,
            "user": self.user(repo.owner),
            "repo": self.repo(repo),
        }

    def pull(self, repo: RepoRec, pr: PullRec, *, simple: bool = False) -> dict[str, Any]:
        data = self._tpl(
            "pull-request-simple" if simple else "pull-request",
            [("octocat/Hello-World", repo.full_name)],
        )
        base = f"{self.api}/repos/{repo.full_name}"
        html = f"{self.web}/{repo.full_name}/pull/{pr.number}"
        data.update(
            id=pr.id,
            node_id=f"PR_{pr.id}",
            number=pr.number,
            title=pr.title,
            body=pr.body,
            state=pr.state,
            draft=pr.draft,
            locked=False,
            active_lock_reason=None,
            user=self.user(pr.author),
            labels=[self.label(repo, n) for n in pr.labels],
            assignee=None,
            assignees=[],
            milestone=None,
            auto_merge=None,
            requested_reviewers=[self.user(r) for r in pr.requested_reviewers],
            requested_teams=[],
            head=self._branch(repo, pr.head, pr.head_sha),
            base=self._branch(repo, pr.base, pr.base_sha),
            created_at=ts(pr.created_at),
            updated_at=ts(pr.updated_at),
            closed_at=ts(pr.closed_at),
            merged_at=ts(pr.merged_at),
            merge_commit_sha=pr.merge_commit_sha,
            url=f"{base}/pulls/{pr.number}",
            html_url=html,
            diff_url=f"{html}.diff",
            patch_url=f"{html}.patch",
            issue_url=f"{base}/issues/{pr.number}",
            commits_url=f"{base}/pulls/{pr.number}/commits",
            review_comments_url=f"{base}/pulls/{pr.number}/comments",
            review_comment_url=f"{base}/pulls/comments{{/number}}",
            comments_url=f"{base}/issues/{pr.number}/comments",
            statuses_url=f"{base}/statuses/{pr.head_sha}",
            author_association=self.association(repo, pr.author),
        )
        data["_links"] = {
            "self": {"href": data["url"]},
            "html": {"href": html},
            "issue": {"href": data["issue_url"]},
            "comments": {"href": data["comments_url"]},
            "review_comments": {"href": data["review_comments_url"]},
            "review_comment": {"href": data["review_comment_url"]},
            "commits": {"href": data["commits_url"]},
            "statuses": {"href": data["statuses_url"]},
        }
        if not simple:
            data.update(
                merged=pr.merged,
                merged_by=self.user(pr.merged_by) if pr.merged_by else None,
                mergeable=None if pr.state == "closed" else True,
                mergeable_state="unknown" if pr.state == "closed" else "clean",
                comments=len(pr.comments),
                review_comments=len(pr.review_comments),
                maintainer_can_modify=False,
                rebaseable=True,
            )
        return data

    def review(self, repo: RepoRec, pr: PullRec, review: ReviewRec) -> dict[str, Any]:
        data = self._tpl("pull-request-review", [("octocat/Hello-World", repo.full_name)])
        pulls = f"{self.api}/repos/{repo.full_name}/pulls/{pr.number}"
        html = f"{self.web}/{repo.full_name}/pull/{pr.number}#pullrequestreview-{review.id}"
        data.update(
            id=review.id,
            node_id=f"PRR_{review.id}",
            user=self.user(review.author),
            body=review.body,
            state=review.state,
            commit_id=review.commit_id,
            submitted_at=ts(review.submitted_at),
            html_url=html,
            pull_request_url=pulls,
            author_association=self.association(repo, review.author),
        )
        data["_links"] = {"html": {"href": html}, "pull_request": {"href": pulls}}
        return data

    def review_comment(
        self, repo: RepoRec, pr: PullRec, comment: ReviewCommentRec
    ) -> dict[str, Any]:
        data = self._tpl("pull-request-review-comment", [("octocat/Hello-World", repo.full_name)])
        data.pop("reactions", None)
        pulls = f"{self.api}/repos/{repo.full_name}/pulls/{pr.number}"
        url = f"{self.api}/repos/{repo.full_name}/pulls/comments/{comment.id}"
        html = f"{self.web}/{repo.full_name}/pull/{pr.number}#discussion_r{comment.id}"
        data.update(
            id=comment.id,
            node_id=f"PRRC_{comment.id}",
            pull_request_review_id=comment.review_id,
            user=self.user(comment.author),
            body=comment.body,
            path=comment.path,
            line=comment.line,
            original_line=comment.line,
            position=comment.line,
            original_position=comment.line,
            start_line=None,
            original_start_line=None,
            start_side=None,
            side="RIGHT",
            commit_id=comment.commit_id,
            original_commit_id=comment.commit_id,
            diff_hunk=comment.diff_hunk,
            created_at=ts(comment.created_at),
            updated_at=ts(comment.created_at),
            url=url,
            html_url=html,
            pull_request_url=pulls,
            author_association=self.association(repo, comment.author),
        )
        data["_links"] = {
            "self": {"href": url},
            "html": {"href": html},
            "pull_request": {"href": pulls},
        }
        data.pop("in_reply_to_id")  # present only on replies
        return data

    def status(self, repo: RepoRec, status: StatusRec) -> dict[str, Any]:
        data = self._tpl("status", [("octocat/Hello-World", repo.full_name)])
        data.update(
            id=status.id,
            node_id=f"SC_{status.id}",
            state=status.state,
            context=status.context,
            description=status.description,
            target_url=status.target_url,
            creator=self.user(status.creator),
            created_at=ts(status.created_at),
            updated_at=ts(status.created_at),
            url=f"{self.api}/repos/{repo.full_name}/statuses/{status.sha}",
            avatar_url=None,
        )
        return data

    def check_run(self, repo: RepoRec, run: CheckRunRec) -> dict[str, Any]:
        data = self._tpl("check-run", [("github/hello-world", repo.full_name)])
        url = f"{self.api}/repos/{repo.full_name}/check-runs/{run.id}"
        data.update(
            id=run.id,
            node_id=f"CR_{run.id}",
            name=run.name,
            head_sha=run.head_sha,
            external_id=run.external_id,
            status=run.status,
            conclusion=run.conclusion,
            started_at=ts(run.created_at),
            completed_at=ts(run.created_at) if run.status == "completed" else None,
            url=url,
            html_url=f"{self.web}/{repo.full_name}/runs/{run.id}",
            details_url=run.details_url,
            output={
                "title": run.title,
                "summary": run.summary,
                "text": None,
                "annotations_count": len(run.annotations),
                "annotations_url": f"{url}/annotations",
            },
            check_suite={"id": run.id},
            pull_requests=[],
        )
        return data


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(
        json.dumps(body),
        status=status,
        headers=headers or {},
        content_type="application/json; charset=utf-8",
    )


def error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return _json(
        status,
        {
            "message": message,
            "documentation_url": "https://docs.github.com/rest",
            "status": str(status),
        },
        headers,
    )


Handler = Callable[["Ctx", dict[str, str]], Response]


class GitHubApi:
    def __init__(self, forge: LocalForge) -> None:
        self.forge = forge
        self.r = Renderer(forge)
        repo = r"/repos/(?P<owner>[^/]+)/(?P<name>[^/]+)"
        self.routes: list[tuple[str, str, Handler]] = [
            ("POST", r"/app/installations/(?P<inst>\d+)/access_tokens", self.access_token),
            ("GET", r"/app", self.get_app),
            ("POST", r"/app-manifests/(?P<code>[^/]+)/conversions", self.convert_manifest),
            ("GET", r"/user", self.get_user),
            ("GET", repo, self.get_repo),
            ("GET", repo + r"/installation", self.repo_installation),
            ("GET", repo + r"/labels/(?P<label>[^/]+)", self.get_label),
            ("POST", repo + r"/labels", self.create_label),
            ("GET", repo + r"/issues/comments/(?P<cid>\d+)", self.get_comment),
            ("PATCH", repo + r"/issues/comments/(?P<cid>\d+)", self.edit_comment),
            ("GET", repo + r"/issues/(?P<n>\d+)", self.get_issue),
            ("GET", repo + r"/issues/(?P<n>\d+)/comments", self.list_comments),
            ("POST", repo + r"/issues/(?P<n>\d+)/comments", self.create_comment),
            ("POST", repo + r"/issues/(?P<n>\d+)/labels", self.add_labels),
            ("GET", repo + r"/collaborators/(?P<user>[^/]+)/permission", self.permission),
            ("GET", repo + r"/contents/(?P<path>.+)", self.contents),
            ("GET", repo + r"/pulls", self.list_pulls),
            ("POST", repo + r"/pulls", self.create_pull),
            ("GET", repo + r"/pulls/(?P<n>\d+)", self.get_pull),
            ("PATCH", repo + r"/pulls/(?P<n>\d+)", self.update_pull),
            ("POST", repo + r"/pulls/(?P<n>\d+)/requested_reviewers", self.request_reviewers),
            ("GET", repo + r"/pulls/(?P<n>\d+)/reviews", self.list_reviews),
            ("GET", repo + r"/pulls/(?P<n>\d+)/comments", self.list_review_comments),
            ("POST", repo + r"/statuses/(?P<sha>[0-9a-f]{40})", self.create_status),
            ("GET", repo + r"/commits/(?P<sha>[^/]+)/statuses", self.list_statuses),
            ("POST", repo + r"/check-runs", self.create_check_run),
            ("GET", repo + r"/commits/(?P<sha>[^/]+)/check-runs", self.list_check_runs),
        ]

    # -- helpers ------------------------------------------------------------

    def _repo(self, ctx: Ctx, m: dict[str, str], need: str = "read") -> RepoRec:
        repo = self.forge.repos.get(("github", f"{m['owner']}/{m['name']}"))
        user = ctx.require_user()
        if repo is None:
            raise ApiError(404, "Not Found")
        rank = ROLE_RANK[repo.role_of(user.login)]
        if rank < ROLE_RANK["read"] and repo.private:
            raise ApiError(404, "Not Found")  # GitHub hides private repos from outsiders
        if rank < ROLE_RANK[need]:
            raise ApiError(
                403,
                "Resource not accessible by integration"
                if user.kind == "Bot"
                else "Must have push access to repository",
            )
        return repo

    @staticmethod
    def _body(ctx: Ctx) -> dict[str, Any]:
        try:
            data = json.loads(ctx.request.get_data() or b"{}")
        except ValueError:
            raise ApiError(400, "Problems parsing JSON") from None
        if not isinstance(data, dict):
            raise ApiError(400, "Problems parsing JSON")
        return data

    @staticmethod
    def _issue(repo: RepoRec, number: str) -> IssueRec | PullRec:
        found = repo.issue_like(int(number))
        if found is None:
            raise ApiError(404, "Not Found")
        return found

    @staticmethod
    def _pull(repo: RepoRec, number: str) -> PullRec:
        found = repo.pulls.get(int(number))
        if found is None:
            raise ApiError(404, "Not Found")
        return found

    # -- App auth -----------------------------------------------------------

    def _app_of_jwt(self, ctx: Ctx, app_id: int | None = None) -> int:
        """The App whose RS256 JWT authorises the request (``app_id``: the one it must be)."""
        auth = ctx.request.headers.get("Authorization", "")
        if not auth.startswith("Bearer "):
            raise ApiError(401, "A JSON web token could not be decoded")
        token = auth.removeprefix("Bearer ")
        if app_id is None:
            try:
                issuer = jwt.decode(token, options={"verify_signature": False}).get("iss")
                app_id = int(str(issuer))
            except (jwt.PyJWTError, ValueError):
                raise ApiError(401, "A JSON web token could not be decoded") from None
        public_key = self.forge.apps.get(app_id)
        try:
            claims = jwt.decode(
                token,
                public_key or "",
                algorithms=["RS256"],
                options={"require": ["iat", "exp", "iss"]},
                leeway=0,
            )
        except jwt.PyJWTError as exc:
            raise ApiError(401, f"A JSON web token could not be decoded ({exc})") from None
        if str(claims["iss"]) != str(app_id):
            raise ApiError(401, "'Issuer' claim ('iss') must be the app id")
        if claims["exp"] - claims["iat"] > 600 + 60:
            raise ApiError(401, "'Expiration time' claim ('exp') is too far in the future")
        return app_id

    def access_token(self, ctx: Ctx, m: dict[str, str]) -> Response:
        installation = self.forge.installations.get(int(m["inst"]))
        if installation is None:
            raise ApiError(404, "Not Found")
        self._app_of_jwt(ctx, installation.app_id)
        user = self.forge.mint_installation_token(installation)
        expires = datetime.now(UTC) + timedelta(seconds=installation.token_lifetime_s)
        data = copy.deepcopy(subset()["examples"]["installation-token"])
        data.pop("repositories", None)
        data.update(
            token=user.token,
            expires_at=ts(expires),
            permissions=dict(installation.permissions),
            repository_selection="selected",
        )
        return _json(201, data)

    def convert_manifest(self, ctx: Ctx, m: dict[str, str]) -> Response:
        """A confirmed manifest's code for a new App: its id, key and webhook secret."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        manifest = self.forge.app_manifests.pop(m["code"], None)
        if manifest is None:
            raise ApiError(404, "Not Found")
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        ).decode()
        public = key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        app_id = new_id()
        self.forge.register_app(app_id, public.decode())
        slug = f"ribbit-app-{app_id}"
        data = copy.deepcopy(subset()["examples"]["integration-from-manifest"])
        data.update(
            id=app_id,
            slug=slug,
            name=str(manifest.get("name") or slug),
            html_url=f"{self.r.web}/apps/{slug}",
            permissions=dict(manifest.get("default_permissions") or {}),
            events=list(manifest.get("default_events") or []),
            webhook_secret=uuid.uuid4().hex + uuid.uuid4().hex,
            pem=pem,
        )
        return _json(201, data)

    def get_app(self, ctx: Ctx, m: dict[str, str]) -> Response:
        app_id = self._app_of_jwt(ctx)
        data = copy.deepcopy(subset()["examples"]["integration"])
        slug = f"ribbit-app-{app_id}"
        data.update(
            id=app_id,
            slug=slug,
            name=f"Ribbit App {app_id}",
            html_url=f"{self.r.web}/apps/{slug}",
        )
        return _json(200, data)

    def repo_installation(self, ctx: Ctx, m: dict[str, str]) -> Response:
        app_id = self._app_of_jwt(ctx)
        full_name = f"{m['owner']}/{m['name']}"
        found = next(
            (
                i
                for i in self.forge.installations.values()
                if i.app_id == app_id and full_name in i.repos
            ),
            None,
        )
        if found is None:
            raise ApiError(404, "Not Found")
        data = copy.deepcopy(subset()["examples"]["installation"])
        data.update(
            id=found.id,
            app_id=app_id,
            app_slug=f"ribbit-app-{app_id}",
            permissions=dict(found.permissions),
            repository_selection="selected",
            access_tokens_url=f"{self.r.api}/app/installations/{found.id}/access_tokens",
        )
        return _json(200, data)

    def get_label(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m)
        if m["label"] not in repo.labels:
            raise ApiError(404, "Not Found")
        return _json(200, self.r.label(repo, m["label"]))

    def create_label(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m, need="write")  # GitHub: creating labels needs write
        data = self._body(ctx)
        name = str(data.get("name") or "")
        if not name:
            raise ApiError(422, "Validation Failed")
        with self.forge.lock:
            if name in repo.labels:
                # GitHub's answer for a duplicate: 422 with code already_exists.
                return _json(
                    422,
                    {
                        "message": "Validation Failed",
                        "errors": [
                            {"resource": "Label", "code": "already_exists", "field": "name"}
                        ],
                        "documentation_url": "https://docs.github.com/rest/issues/labels",
                        "status": "422",
                    },
                )
            repo.labels[name] = str(data.get("color") or "ededed")
        return _json(201, self.r.label(repo, name))

    def get_user(self, ctx: Ctx, m: dict[str, str]) -> Response:
        return _json(200, self.r.user(ctx.require_user().login))

    # -- repositories, issues, comments ---------------------------------------

    def get_repo(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m)
        return _json(200, self.r.repo(repo, ctx.require_user().login))

    def get_issue(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m)
        return _json(200, self.r.issue(repo, self._issue(repo, m["n"])))

    def list_comments(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m)
        issue = self._issue(repo, m["n"])
        return _json(200, [self.r.comment(repo, issue.number, c) for c in issue.comments])

    def create_comment(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m)
        body = self._body(ctx).get("body")
        if not isinstance(body, str) or not body:
            raise ApiError(422, "Validation Failed")
        issue = self._issue(repo, m["n"])
        comment = self.forge.add_comment_record(issue, ctx.require_user().login, body)
        return _json(
            201,
            self.r.comment(repo, issue.number, comment),
            {"Location": f"{self.r.api}/repos/{repo.full_name}/issues/comments/{comment.id}"},
        )

    def _find_comment(self, repo: RepoRec, cid: str) -> tuple[IssueRec | PullRec, CommentRec]:
        candidates: list[IssueRec | PullRec] = [*repo.issues.values(), *repo.pulls.values()]
        for issue in candidates:
            for comment in issue.comments:
                if comment.id == int(cid):
                    return issue, comment
        raise ApiError(404, "Not Found")

    def get_comment(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m)
        issue, comment = self._find_comment(repo, m["cid"])
        return _json(200, self.r.comment(repo, issue.number, comment))

    def edit_comment(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m)
        issue, comment = self._find_comment(repo, m["cid"])
        user = ctx.require_user()
        if comment.author != user.login and ROLE_RANK[repo.role_of(user.login)] < 3:
            raise ApiError(403, "Must have admin rights to Repository.")
        body = self._body(ctx).get("body")
        if not isinstance(body, str):
            raise ApiError(422, "Validation Failed")
        self.forge.edit_comment_record(comment, body)
        return _json(200, self.r.comment(repo, issue.number, comment))

    def add_labels(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m, "triage")
        issue = self._issue(repo, m["n"])
        # GitHub takes a bare JSON array (what PyGithub sends) or {"labels": [...]}.
        raw = json.loads(ctx.request.get_data() or b"[]")
        labels = raw.get("labels", []) if isinstance(raw, dict) else raw
        if not isinstance(labels, list):
            raise ApiError(422, "Validation Failed")
        for name in labels:
            if name not in issue.labels:
                issue.labels.append(str(name))
        return _json(200, [self.r.label(repo, name) for name in issue.labels])

    def permission(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m)
        login = m["user"]
        if login not in self.forge.users:
            raise ApiError(404, "Not Found")
        role = repo.role_of(login)
        legacy = {
            "admin": "admin",
            "maintain": "write",
            "write": "write",
            "triage": "read",
            "read": "read",
        }.get(role, "none")
        data = copy.deepcopy(subset()["examples"]["collaborator-permission"])
        user = self.r.user(login)
        user["permissions"] = {
            "admin": role == "admin",
            "maintain": role in ("admin", "maintain"),
            "push": legacy in ("admin", "write"),
            "triage": ROLE_RANK[role] >= 2,
            "pull": ROLE_RANK[role] >= 1,
        }
        user["role_name"] = role
        data.update(permission=legacy, role_name=role, user=user)
        return _json(200, data)

    def contents(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m)
        path = m["path"]
        ref = ctx.request.args.get("ref") or repo.default_branch
        if ".." in path.split("/") or ref.startswith("-"):
            raise ApiError(404, "Not Found")
        content = repo.file_at(ref, path)
        if content is None:
            if repo.is_tree(ref, path):
                return _json(200, [])
            raise ApiError(404, "Not Found")
        sha = repo.git("rev-parse", f"{ref}:{path}").strip()
        data = self.r._tpl("content-file", [("octocat/Hello-World", repo.full_name)])
        encoded = base64.encodebytes(content).decode()
        data.update(
            type="file",
            encoding="base64",
            size=len(content),
            name=path.rsplit("/")[-1],
            path=path,
            content=encoded,
            sha=sha,
            url=f"{self.r.api}/repos/{repo.full_name}/contents/{path}?ref={ref}",
            html_url=f"{self.r.web}/{repo.full_name}/blob/{ref}/{path}",
            git_url=f"{self.r.api}/repos/{repo.full_name}/git/blobs/{sha}",
            download_url=None,
        )
        data["_links"] = {"self": data["url"], "git": data["git_url"], "html": data["html_url"]}
        return _json(200, data)

    # -- pull requests ----------------------------------------------------------

    def list_pulls(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m)
        state = ctx.request.args.get("state", "open")
        head = ctx.request.args.get("head")
        found = []
        for pr in sorted(repo.pulls.values(), key=lambda p: -p.number):
            self.forge.refresh_pull(repo, pr)
            if state != "all" and pr.state != state:
                continue
            if head is not None and head != f"{repo.owner}:{pr.head}":
                continue
            found.append(self.r.pull(repo, pr, simple=True))
        return _json(200, found)

    def create_pull(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m, "write")
        data = self._body(ctx)
        head, base = str(data.get("head", "")), str(data.get("base", ""))
        head = head.split(":", 1)[1] if ":" in head else head
        title = data.get("title")
        if not title or not isinstance(title, str):
            raise ApiError(422, "Validation Failed")
        head_sha, base_sha = repo.branch_sha(head), repo.branch_sha(base)
        if head_sha is None or base_sha is None:
            raise ApiError(422, "Validation Failed")
        for pr in repo.pulls.values():
            if pr.head == head and pr.base == base and pr.state == "open":
                raise ApiError(422, f"A pull request already exists for {repo.owner}:{head}.")
        pr = self.forge.add_pull_record(
            repo,
            ctx.require_user().login,
            title,
            str(data.get("body") or ""),
            head,
            base,
            draft=bool(data.get("draft", False)),
        )
        return _json(
            201,
            self.r.pull(repo, pr),
            {"Location": f"{self.r.api}/repos/{repo.full_name}/pulls/{pr.number}"},
        )

    def get_pull(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m)
        pr = self._pull(repo, m["n"])
        self.forge.refresh_pull(repo, pr)
        accept = ctx.request.headers.get("Accept", "")
        if "diff" in accept:
            return Response(
                repo.diff(pr.base_sha, pr.head_sha),
                status=200,
                content_type="text/plain; charset=utf-8",
            )
        return _json(200, self.r.pull(repo, pr))

    def update_pull(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m, "write")
        pr = self._pull(repo, m["n"])
        data = self._body(ctx)
        for key in ("title", "body"):
            if key in data:
                if not isinstance(data[key], str):
                    raise ApiError(422, "Validation Failed")
                setattr(pr, key, data[key])
        self.forge.refresh_pull(repo, pr)
        return _json(200, self.r.pull(repo, pr))

    def request_reviewers(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m, "write")
        pr = self._pull(repo, m["n"])
        reviewers = self._body(ctx).get("reviewers", [])
        for login in reviewers:
            if login not in self.forge.users or repo.role_of(login) == "none":
                raise ApiError(
                    422,
                    "Reviews may only be requested from collaborators. One or "
                    f"more of the users or teams you specified is not a "
                    f"collaborator of the {repo.full_name} repository.",
                )
            if login == pr.author:
                raise ApiError(422, "Review cannot be requested from pull request author.")
        for login in reviewers:
            if login not in pr.requested_reviewers:
                pr.requested_reviewers.append(login)
        return _json(201, self.r.pull(repo, pr, simple=True))

    def list_reviews(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m)
        pr = self._pull(repo, m["n"])
        return _json(200, [self.r.review(repo, pr, r) for r in pr.reviews])

    def list_review_comments(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m)
        pr = self._pull(repo, m["n"])
        return _json(200, [self.r.review_comment(repo, pr, c) for c in pr.review_comments])

    # -- statuses -----------------------------------------------------------------

    def create_status(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m, "write")
        data = self._body(ctx)
        state = data.get("state")
        if state not in ("error", "failure", "pending", "success"):
            raise ApiError(422, "Validation Failed")
        description = data.get("description")
        if description is not None and len(str(description)) > 140:
            raise ApiError(
                422, "Validation Failed: description is too long (maximum is 140 characters)"
            )
        try:
            repo.git("cat-file", "-e", f"{m['sha']}^{{commit}}")
        except Exception:
            raise ApiError(422, f"No commit found for SHA: {m['sha']}") from None
        status = StatusRec(
            id=new_id(),
            sha=m["sha"],
            state=str(state),
            context=str(data.get("context") or "default"),
            description=str(description or ""),
            target_url=data.get("target_url"),
            creator=ctx.require_user().login,
            created_at=now(),
        )
        repo.statuses.append(status)
        return _json(201, self.r.status(repo, status))

    def list_statuses(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m)
        found = [s for s in reversed(repo.statuses) if s.sha == m["sha"]]
        return _json(200, [self.r.status(repo, s) for s in found])

    # -- check runs ---------------------------------------------------------------

    def create_check_run(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m, "write")
        data = self._body(ctx)
        name, sha = data.get("name"), data.get("head_sha")
        if not isinstance(name, str) or not name or not isinstance(sha, str):
            raise ApiError(422, "Validation Failed: name and head_sha are required")
        status = data.get("status", "queued")
        if status not in _CHECK_STATUSES:
            raise ApiError(422, f"Validation Failed: status {status!r} is not included")
        conclusion = data.get("conclusion")
        if status == "completed" and conclusion not in _CHECK_CONCLUSIONS:
            raise ApiError(422, "Validation Failed: conclusion is required when completed")
        try:
            repo.git("cat-file", "-e", f"{sha}^{{commit}}")
        except Exception:
            raise ApiError(422, f"No commit found for SHA: {sha}") from None
        output = data.get("output") or {}
        if not isinstance(output, dict):
            raise ApiError(422, "Validation Failed: output")
        if output and not (output.get("title") and output.get("summary") is not None):
            raise ApiError(422, "Validation Failed: output needs a title and a summary")
        if len(str(output.get("summary") or "")) > 65535:
            raise ApiError(422, "Validation Failed: summary is too long")
        run = CheckRunRec(
            id=new_id(),
            name=name,
            head_sha=sha,
            external_id=data.get("external_id"),
            status=str(status),
            conclusion=conclusion,
            title=str(output.get("title") or ""),
            summary=str(output.get("summary") or ""),
            annotations=_annotations(output.get("annotations") or []),
            details_url=data.get("details_url"),
            creator=ctx.require_user().login,
            created_at=now(),
        )
        repo.check_runs.append(run)
        return _json(201, self.r.check_run(repo, run))

    def list_check_runs(self, ctx: Ctx, m: dict[str, str]) -> Response:
        repo = self._repo(ctx, m)
        try:
            sha = repo.git("rev-parse", "--verify", "-q", f"{m['sha']}^{{commit}}").strip()
        except Exception:
            raise ApiError(422, f"No commit found for SHA: {m['sha']}") from None
        name = ctx.request.args.get("check_name")
        runs = [r for r in reversed(repo.check_runs) if r.head_sha == sha]
        if name is not None:
            runs = [r for r in runs if r.name == name]
        if ctx.request.args.get("filter", "latest") == "latest":
            latest: dict[str, CheckRunRec] = {}
            for r in runs:
                latest.setdefault(r.name, r)
            runs = list(latest.values())
        return _json(
            200,
            {"total_count": len(runs), "check_runs": [self.r.check_run(repo, r) for r in runs]},
        )


_CHECK_STATUSES = ("queued", "in_progress", "completed", "waiting", "requested", "pending")
_CHECK_CONCLUSIONS = (
    "action_required",
    "cancelled",
    "failure",
    "neutral",
    "success",
    "skipped",
    "timed_out",
)


def _annotations(raw: Any) -> list[AnnotationRec]:
    """GitHub's rules: at most 50 per request, each with a path, lines, a level and a message."""
    if not isinstance(raw, list) or len(raw) > 50:
        raise ApiError(422, "Validation Failed: at most 50 annotations per request")
    out = []
    for a in raw:
        if not isinstance(a, dict):
            raise ApiError(422, "Validation Failed: annotation")
        start, end = a.get("start_line"), a.get("end_line")
        if (
            not isinstance(a.get("path"), str)
            or not isinstance(start, int)
            or not isinstance(end, int)
            or start < 1
            or end < start
            or a.get("annotation_level") not in ("notice", "warning", "failure")
            or not isinstance(a.get("message"), str)
        ):
            raise ApiError(422, "Validation Failed: annotation needs path, lines, level, message")
        out.append(
            AnnotationRec(
                path=a["path"],
                start_line=start,
                end_line=end,
                level=a["annotation_level"],
                title=str(a.get("title") or ""),
                message=a["message"],
            )
        )
    return out


def new_installation_token() -> str:
    return f"ghs_{uuid.uuid4().hex}{int(time.time()) % 1000:03d}"


def bot_user(login: str, token: str) -> User:
    return User(login=login, id=new_id(), token=token, kind="Bot")
