"""Who is told to fix what, word for word, for each failure a job stores
(worker/sandbox/failure.py for a set-up, worker/pipelines/held.py for the gates'
refusal), and the stored record's round trip (bot/store/failure.py)."""

from __future__ import annotations

from bot.forges.sanitize import sanitize_forge_text
from bot.store.failure import FailureReason, Fixer
from bot.store.records.gate_report import Finding, GateReport, GateResult
from worker.gates.verdict import TestVerdict
from worker.pipelines.held import held_back
from worker.repo_config import parse_repo_config
from worker.sandbox.egress_policy import REPO_HOST_REFUSED, BlockedRequest
from worker.sandbox.failure import setup_failure
from worker.sandbox.setup import SetupResult

TLS_OUTPUT = (
    "Collecting tomli-w\n"
    "  Could not fetch URL https://pypi.org/simple/tomli-w/: There was a problem confirming "
    "the ssl certificate: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
    "self signed certificate in certificate chain (_ssl.c:1006)\n"
    "ERROR: No matching distribution found for tomli-w"
)
GO_UNREACHABLE = (
    'go: github.com/mattn/go-colorable@v0.1.13: Get "https://proxy.golang.org/...": Forbidden'
)


def _setup(output: str, *blocked: BlockedRequest, command: str = "pip install -e .") -> SetupResult:
    return SetupResult(
        command=command, ok=False, exit_code=1, output=output, duration_s=1.0, blocked=blocked
    )


def test_tls_interception_is_the_operators_ca_bundle_not_the_maintainers_setup() -> None:
    refused = BlockedRequest("CONNECT", "pypi.org", 443, "not tls")
    failure = setup_failure(_setup(TLS_OUTPUT, refused), detected=False, permitted_hosts=())
    assert failure.fixer is not None
    assert failure.fixer.line() == (
        "the operator, in the deployment's `RIBBIT_SANDBOX__SETUP_CA_BUNDLE`: a TLS-inspecting "
        "gateway re-signs the registries' certificates (CERTIFICATE_VERIFY_FAILED), so set "
        "this to a PEM bundle with the gateway's CA."
    )
    assert failure.what == (
        "The repository's setup failed (`pip install -e .` exited 1; the setup network "
        "refused 1 request(s)), so the agent did not start. This is about the repository's "
        "set-up, not a patch."
    )
    assert failure.output_tail.endswith("ERROR: No matching distribution found for tomli-w")


def test_a_refused_registry_host_is_the_operators_unless_repositories_may_add_it() -> None:
    unlisted = BlockedRequest("CONNECT", "proxy.golang.org", 443, "host not on the allow-list")
    setup = _setup(GO_UNREACHABLE, unlisted, command="go mod download")
    failure = setup_failure(setup, detected=True, permitted_hosts=())
    assert failure.refused_hosts == ("CONNECT proxy.golang.org:443 (host not on the allow-list)",)
    assert failure.fixer == Fixer(
        "operator",
        "RIBBIT_SANDBOX__REPO_SETUP_HOSTS",
        "the setup asked for `proxy.golang.org`, which is not on the setup network's "
        "allow-list: add it here so the repository may name it in `.ribbit.yml` "
        "`setup_hosts` (or to RIBBIT_SANDBOX__SETUP_ALLOWED_HOSTS for every repository).",
    )
    mine = setup_failure(setup, detected=True, permitted_hosts=("*.golang.org",))
    assert mine.fixer is not None and mine.fixer.line() == (
        "the maintainer, in `setup_hosts` in `.ribbit.yml` on the default branch: add "
        "`proxy.golang.org` to `setup_hosts` (this deployment lets repositories add them)."
    )


def test_a_setup_host_the_deployment_does_not_permit_is_the_operators() -> None:
    asked = BlockedRequest("setup_hosts", "pkgs.corp.example", 443, REPO_HOST_REFUSED)
    failure = setup_failure(_setup("", asked), detected=False, permitted_hosts=())
    assert failure.fixer is not None and failure.fixer.line() == (
        "the operator, in the deployment's `RIBBIT_SANDBOX__REPO_SETUP_HOSTS`: `.ribbit.yml` "
        "`setup_hosts` names `pkgs.corp.example`, which this deployment does not let "
        "repositories add: add them here, or take them out of `setup_hosts`."
    )


def test_a_detected_setup_that_fails_tells_the_maintainer_to_name_one() -> None:
    failure = setup_failure(
        _setup("ERROR: No matching distribution found for nope"),
        detected=True,
        permitted_hosts=(),
    )
    assert failure.fixer is not None and failure.fixer.line() == (
        "the maintainer, in `setup` in `.ribbit.yml` on the default branch: `.ribbit.yml` "
        "names no `setup`, so this was the usual install for what the repository declares: "
        'name the right command in `setup`, or `setup: ""` if nothing needs installing.'
    )


def test_a_missing_toolchain_is_the_operators_image() -> None:
    output = "bash: line 1: go: command not found"
    failure = setup_failure(
        _setup(output, command="go mod download"), detected=True, permitted_hosts=()
    )
    assert failure.fixer == Fixer(
        "operator",
        "RIBBIT_SANDBOX__IMAGE",
        "the sandbox image has no `go`: use an image that has it (or let repositories name "
        "one: RIBBIT_SANDBOX__REPO_IMAGES and `.ribbit.yml` `image`).",
    )


def _tests_refused(logs: str, finding: str) -> GateReport:
    return GateReport.from_results(
        [
            GateResult(
                "tests",
                passed=False,
                findings=(Finding("tests", "tests-failed", finding),),
                logs=logs,
            )
        ],
        duration_s=0,
    )


def test_a_missing_test_dependency_is_the_maintainers_setup() -> None:
    after = "\n".join(
        [
            "$ python -m pytest -q",
            "ImportError while loading conftest '/work/tests/conftest.py'.",
            "tests/conftest.py:3: in <module>",
            "    import pytest_asyncio",
            "E   ModuleNotFoundError: No module named 'pytest_asyncio'",
            "[exit 4]",
        ]
    )
    report = _tests_refused(
        f"--- before ---\n{after}\n--- after ---\n{after}",
        "the test command exits 4 with the patch (no per-test report to tell which tests fail)",
    )
    broken = TestVerdict(
        base_broken=True, base_reason="no test passes", targets=(), target_failures=()
    )
    held = held_back(report, broken, parse_repo_config(None))
    assert held is not None
    failure = held.failure
    assert failure.what == (
        "The gates did not pass (`tests ✖ (1 finding)`), but the base tree's tests fail too "
        "(no test passes): the repository's test set-up looks broken rather than the patch. "
        "No PR was opened. First finding (tests): the test command exits 4 with the patch "
        "(no per-test report to tell which tests fail)"
    )
    # The patched run's own output (not the base's), sanitised as the forge shows it.
    assert failure.output_tail == sanitize_forge_text(after)
    assert failure.fixer == Fixer(
        "maintainer",
        "setup",
        "`pytest_asyncio` is not installed: install the test dependencies in `setup` "
        "(`pip install -e .[test]`, say).",
    )


def test_a_gate_refusal_says_the_findings_words_and_blames_only_the_patch() -> None:
    fine = TestVerdict(base_broken=False, base_reason="", targets=(), target_failures=())
    report = _tests_refused(
        "--- before ---\n1 passed\n--- after ---\nFAILED tests/test_add.py::test_add",
        "a test the issue is about does not pass: `tests/test_add.py::test_add`",
    )
    held = held_back(report, fine, parse_repo_config(None))
    assert held is not None
    assert held.failure.what == (
        "The patch did not pass the gates (`tests ✖ (1 finding)`), so no PR was opened. First "
        "finding (tests): a test the issue is about does not pass: `tests/test_add.py::test_add`"
    )
    assert held.failure.fixer is None
    assert held.failure.output_tail == "FAILED tests/test_add.py::test_add"


def test_the_record_reads_back_as_stored_and_keeps_only_the_tail() -> None:
    output = "\n".join(f"line {n}" for n in range(40))
    failure = setup_failure(_setup(TLS_OUTPUT + "\n" + output), detected=False, permitted_hosts=())
    assert failure.output_tail.splitlines() == [f"line {n}" for n in range(25, 40)]
    assert FailureReason.from_json(failure.to_json()) == failure
    assert FailureReason.from_json({"what": 3}) is None and FailureReason.from_json(None) is None
