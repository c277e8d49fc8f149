"""Build an environment from a fix: base commit, fix commit, issue text.

The fix's diff is split into its test part (``test_patch``) and the rest
(``patch``, the reference solution). The tests run in a sandbox twice over, each
state ``reruns`` times with per-test results from JUnit XML:

- *before*: base + test_patch (the new tests present, the fix not);
- *after*: base + test_patch + patch.

FAIL_TO_PASS is what fails (or is missing) before and passes after; PASS_TO_PASS
what passes in both. Test ids are pytest node ids from the one JUnit reader
(:mod:`worker.gates.junit`), and the builder proves each one runnable: a last
run of the *after* state selects exactly those ids (through the one test runner,
:mod:`worker.gates.testrun`) and every one must be found and pass, or the
candidate is rejected (``ids_not_runnable``). A test whose outcome changes
between reruns of one state is flaky and dropped from both lists. A candidate is
rejected, with its reason, when no test goes from fail to pass (a fix without
tests, or tests that did not catch the bug), when a run times out, or when the
patches do not apply.

Every sandbox is set up as the solve job sets up its own (the :class:`SandboxRecipe`:
the production setup step, with the repository's setup command behind the registry
proxy); a candidate whose setup fails is rejected (``setup_failed``), since no episode
could start in it.

If the issue text quotes the fix (a pasted diff, the changed lines), those parts
are stripped so the environment does not hand the model its answer.

The issue's comments, judged by the solve job's trust rule, are selected and formatted
by the job's own function (:func:`worker.pipelines.issue_task.prompt_comments`) and kept
(stripped of quotes of the fix too), so a rollout shows what a job on the issue would.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from bot.hostgit import GitError, clone_at, git_ok, latest_tag, resolve_commit
from trainer.envs.patches import split_by_file, split_test_patch
from trainer.envs.schema import (
    DEFAULT_TEST_COMMAND,
    Environment,
    PromptComment,
    Provenance,
    Rejection,
    one_setup_command,
)
from worker.agent.episode import SandboxRecipe, SetupFailed
from worker.gates import evidence
from worker.gates.tamper import ran_outside
from worker.gates.testcmd import recognise
from worker.gates.testrun import TestRun, run_tests, select_batches
from worker.pipelines.issue_task import JudgedComment, prompt_comments
from worker.sandbox.base import Sandbox
from worker.sandbox.setup import SetupResult
from worker.sandbox.snapshot import installed_copies

PATCH_PATH = ".ribbit.patch"
_MIN_LEAK_CHARS = 12  # shorter added lines ("return x", "pass") are too common to count
_FENCE = re.compile(r"```.*?```", re.DOTALL)


@dataclass(frozen=True)
class BuildSpec:
    repo_dir: Path
    base: str
    fix: str
    issue_text: str
    repo: str = "local/repo"  # owner/name, for the instance id
    # The repository's .ribbit.yml commands and image at the time of the fix.
    test_command: str = DEFAULT_TEST_COMMAND
    setup_commands: tuple[str, ...] = ()
    image: str | None = None
    hints_text: str = ""
    provenance: Provenance = field(default_factory=Provenance)
    # The fix as a diff, when there is no fix commit at hand (a merged PR's diff from
    # the forge); ``fix`` is then ignored.
    fix_diff: str | None = None
    # The job's exact first message (TaskRecord.first_message), for rollouts to replay.
    task_text: str | None = None
    # The issue's comments with their authors' trust as the solve job decides it: the
    # environment keeps the ones a job's prompt would carry (a fix with no job).
    comments: tuple[JudgedComment, ...] = ()


def _replayable(task_text: str | None, patch: str) -> str | None:
    """The job's first message, unless it quotes the fix (then the rollout renders the
    stripped problem statement instead: a replay must never hand the model the answer)."""
    if task_text is None or strip_leaked_solution(task_text, patch)[1]:
        return None
    return task_text


def _stripped_task(spec: BuildSpec, patch: str) -> tuple[str, list[PromptComment], bool]:
    """The issue text and the comments a job's prompt would carry, each without what
    quotes the fix (a comment left empty by that is dropped); and whether any did."""
    problem, leaked = strip_leaked_solution(spec.issue_text, patch)
    comments = []
    for comment in prompt_comments(spec.comments):
        body, quoted = strip_leaked_solution(comment.body, patch)
        leaked |= quoted
        if body.strip():
            comments.append(PromptComment(author=comment.author, body=body))
    return problem, comments, leaked


def _diff_fix_name(diff: str) -> str:
    """What stands for the fix commit of a fix given as a diff (its content's hash)."""
    return "diff-" + hashlib.sha256(diff.encode()).hexdigest()[:12]


def _provenance(spec: BuildSpec, fix: str, *, leaked: bool, flaky: list[str]) -> Provenance:
    """The spec's provenance with what the build learned: the fix, when it was made, what
    was stripped and dropped."""
    update = {"fix_commit": fix, "fixed_at": _fix_time(spec, fix), "leak_stripped": leaked}
    return spec.provenance.model_copy(update=update | {"flaky_tests": flaky})


def _fix_time(spec: BuildSpec, fix: str) -> str:
    """When the fix was made (its commit's committer date): what `ribbit envs split` holds
    the newest out by. A fix given as a diff has no commit here: the build time."""
    if spec.fix_diff is None:
        try:
            out = git_ok(spec.repo_dir, "log", "-1", "--format=%cI", fix, "--", any_owner=False)
            return datetime.fromisoformat(out.decode().strip()).astimezone(UTC).isoformat()
        except (GitError, ValueError):
            pass
    return datetime.now(UTC).isoformat()


class BuildRejected(Exception):
    def __init__(self, rejection: Rejection) -> None:
        super().__init__(f"{rejection.reason}: {rejection.detail}")
        self.rejection = rejection


class EnvironmentBuilder:
    def __init__(
        self,
        sandbox_factory: SandboxRecipe,
        *,
        reruns: int = 3,
        test_timeout_s: float = 300.0,
    ) -> None:
        if reruns < 1:
            raise ValueError("reruns must be >= 1")
        self.sandbox_factory = sandbox_factory
        self.reruns = reruns
        self.test_timeout_s = test_timeout_s

    def build(self, spec: BuildSpec) -> Environment:
        """The environment, or :class:`BuildRejected` with the reason."""
        candidate = f"{spec.repo}@{spec.base[:12]}..{(spec.fix or 'diff')[:12]}"

        def reject(reason: str, detail: str) -> BuildRejected:
            return BuildRejected(Rejection(candidate=candidate, reason=reason, detail=detail))  # type: ignore[arg-type]

        if not spec.issue_text.strip():
            raise reject("no_problem_statement", "the issue text is empty")
        base = resolve_commit(spec.repo_dir, spec.base, any_owner=False)
        if spec.fix_diff is not None:
            diff, fix = spec.fix_diff, _diff_fix_name(spec.fix_diff)
        else:
            fix = resolve_commit(spec.repo_dir, spec.fix, any_owner=False)
            diff = git_ok(
                spec.repo_dir, "diff", "--binary", "--no-color", base, fix, "--", any_owner=False
            ).decode()
        patch, test_patch = split_test_patch(diff)
        if not patch.strip():
            raise reject("no_code_change", "the fix changes only tests (or nothing)")

        workdir = Path(tempfile.mkdtemp(prefix="ribbit-envbuild-"))
        try:
            checkout = clone_at(spec.repo_dir, workdir / "repo", base, any_owner=False)
            before = self._runs(checkout, spec, [test_patch], refuse_copies=True)
            after = self._runs(checkout, spec, [test_patch, patch])
            unusable = _unusable(before, after)
            if unusable is not None:
                raise reject(*unusable)
            flaky = sorted(_flaky(before) | _flaky(after))
            before_out, after_out = before[0].outcomes, after[0].outcomes
            if not after_out:
                raise reject("no_test_results", f"no test ran after the fix: {after[0].log(500)}")
            # The runner as the gate resolves it from the base tree (``npm test`` is mocha
            # where package.json says so): it says how a test module that did not load shows.
            runner = recognise(spec.test_command, "caller", checkout).runner
            fail_to_pass, pass_to_pass = _shown(before_out, after_out, flaky, runner)
            if not fail_to_pass:
                raise reject("no_fail_to_pass", _nothing_shown(test_patch, flaky))
            unrunnable = self._unrunnable(
                checkout, spec, [test_patch, patch], [*fail_to_pass, *pass_to_pass]
            )
            if unrunnable:
                raise reject(
                    "ids_not_runnable",
                    f"{len(unrunnable)} test id(s) do not select a passing test when "
                    f"given to the test command: {', '.join(unrunnable[:10])}",
                )
        except PatchDoesNotApply as exc:
            raise reject("patch_does_not_apply", str(exc)) from None
        except SetupFailed as exc:
            raise reject("setup_failed", f"{exc}\n{exc.setup.output[-500:]}") from None
        except CopyInstalled as exc:
            raise reject("copy_install", str(exc)) from None
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

        problem, comments, leaked = _stripped_task(spec, patch)
        if not problem.strip():
            raise reject(
                "no_problem_statement", "the issue text is all quotes of the fix; nothing is left"
            )
        return Environment(
            instance_id=instance_id(spec.repo, fix),
            repo=spec.repo,
            base_commit=base,
            problem_statement=problem,
            hints_text=spec.hints_text,
            issue_comments=comments,
            patch=patch,
            test_patch=test_patch,
            FAIL_TO_PASS=fail_to_pass,
            PASS_TO_PASS=pass_to_pass,
            created_at=datetime.now(UTC).isoformat(),
            version=latest_tag(spec.repo_dir, base, any_owner=False) or "",
            image=spec.image,
            setup_commands=list(spec.setup_commands),
            test_command=spec.test_command,
            test_timeout_s=self.test_timeout_s,
            provenance=_provenance(spec, fix, leaked=leaked, flaky=flaky),
            task_text=_replayable(spec.task_text, patch),
        )

    def _runs(
        self, checkout: Path, spec: BuildSpec, patches: list[str], *, refuse_copies: bool = False
    ) -> list[TestRun]:
        recipe = self.sandbox_factory.for_image(spec.image)
        with recipe(checkout) as sandbox:
            set_up(sandbox, recipe, spec.setup_commands)
            # Asked once a build (the set-up is the same for every run of it).
            copies = installed_copies(sandbox) if refuse_copies else []
            if copies:
                raise CopyInstalled(copies)
            for p in patches:
                apply_patch(sandbox, p)
            return [
                run_tests(sandbox, spec.test_command, timeout=self.test_timeout_s)
                for _ in range(self.reruns)
            ]

    def _unrunnable(
        self, checkout: Path, spec: BuildSpec, patches: list[str], ids: list[str]
    ) -> list[str]:
        """The ids that, selected on their own through the test command, are not found
        or do not pass (the round trip every FAIL_TO_PASS/PASS_TO_PASS id must make)."""
        bad: list[str] = []
        recipe = self.sandbox_factory.for_image(spec.image)
        with recipe(checkout) as sandbox:
            set_up(sandbox, recipe, spec.setup_commands)
            for p in patches:
                apply_patch(sandbox, p)
            for batch in select_batches(ids):
                run = run_tests(
                    sandbox,
                    spec.test_command,
                    timeout=self.test_timeout_s,
                    select=batch,
                )
                got = run.outcomes
                bad += [t for t in batch if run.timed_out or got.get(t) != "passed"]
        return bad


def _nothing_shown(test_patch: str, flaky: Sequence[str]) -> str:
    """Why no test shows the fix (``no_fail_to_pass``'s detail)."""
    touched = "touches no test file" if not test_patch else "changes tests"
    flakes = f"; flaky: {', '.join(flaky)}" if flaky else ""
    return f"no test fails before the fix and passes after (the fix {touched}{flakes})"


def _shown(
    before: Mapping[str, str], after: Mapping[str, str], flaky: Sequence[str], runner: str
) -> tuple[list[str], list[str]]:
    """FAIL_TO_PASS by the gate's own judge (worker/gates/evidence.py: a solve job's
    "verified" and an environment's FAIL_TO_PASS mean the same thing), and PASS_TO_PASS."""
    fail_to_pass = evidence.fail_to_pass(before, after, flaky=flaky, runner=runner)
    kept = [t for t, o in after.items() if o == "passed" and before.get(t) == "passed"]
    return fail_to_pass, sorted(t for t in kept if t not in flaky)


def _unusable(before: list[TestRun], after: list[TestRun]) -> tuple[str, str] | None:
    """Why runs before and after the fix cannot make an environment (a rejection's
    reason and detail), or None."""
    for state, runs in (("before", before), ("after", after)):
        if any(r.timed_out for r in runs):
            return "timeout", f"the tests timed out {state} the fix"
    # The reward reads the patched run alone, with no base run to excuse what the suite
    # itself does: where the fixed code's run is not its own (processes the suite leaves
    # behind, a report that disagrees), it would refuse every rollout.
    unowned = next((r.not_own for r in after if r.not_own), None)
    if ran_outside(*after):
        unowned = "its results came from another process, which the watch does not see"
    if unowned:
        return "run_not_own", (
            f"the tests' run with the fix is not their own ({unowned}): the reward would "
            "refuse every patch as tampered"
        )
    return None


def set_up(sandbox: Sandbox, recipe: SandboxRecipe, commands: Sequence[str]) -> SetupResult:
    """The production setup step with the environment's setup commands, in ``sandbox``:
    what building and grading run before anything else (rollouts run it as part of
    their episode). Raises :class:`SetupFailed` when it fails."""
    setup = recipe.setup(sandbox, one_setup_command(commands))
    if not setup.ok:
        raise SetupFailed(setup)
    return setup


class PatchDoesNotApply(Exception):
    pass


class CopyInstalled(Exception):
    """The set-up installs a copy of the package (``pip install .``, not ``-e``): here,
    as in the grader, the fix is applied after set-up, so the tests would import the
    copy of the base, before and after the fix alike."""

    def __init__(self, copies: Sequence[str]) -> None:
        super().__init__(
            f"the set-up installs a copy of the package from {', '.join(copies)} "
            "(pip install ., not -e): the tests would run the base's code before and after "
            "the fix; set it up editable (pip install -e .) in the environment's set-up"
        )


def apply_patch(sandbox: Sandbox, patch: str) -> None:
    if not patch.strip():
        return
    sandbox.write_file(PATCH_PATH, patch.encode())
    result = sandbox.exec(["git", "apply", "--whitespace=nowarn", PATCH_PATH], timeout=60)
    sandbox.exec(["rm", "-f", PATCH_PATH], timeout=30)
    if result.exit_code != 0:
        raise PatchDoesNotApply(result.stderr.strip()[:500] or "git apply failed")


def _flaky(runs: list[TestRun]) -> set[str]:
    names = set().union(*(r.outcomes for r in runs))
    return {n for n in names if len({r.outcomes.get(n) for r in runs}) > 1}


def strip_leaked_solution(issue_text: str, patch: str) -> tuple[str, bool]:
    """The issue text without the parts that quote the fix's added code; and whether any did."""
    added = {
        line.strip()
        for section in split_by_file(patch)
        for line in section.added_lines
        if len(line.strip()) >= _MIN_LEAK_CHARS
    }

    def leaks(text: str) -> bool:
        return "diff --git" in text or any(a in text for a in added)

    if not leaks(issue_text):
        return issue_text, False
    text = _FENCE.sub(lambda m: "" if leaks(m.group(0)) else m.group(0), issue_text)
    kept = [line for line in text.splitlines() if not leaks(line)]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip(), True


def instance_id(repo: str, fix: str) -> str:
    """SWE-bench style: ``owner__name-<fix sha prefix>``; only safe characters."""
    slug = re.sub(r"[^A-Za-z0-9_.-]", "_", repo.replace("/", "__"))
    return f"{slug}-{fix.removeprefix('diff-')[:12]}"


__all__ = [
    "BuildRejected",
    "BuildSpec",
    "EnvironmentBuilder",
    "GitError",
    "apply_patch",
    "instance_id",
    "set_up",
    "strip_leaked_solution",
]
