"""``ribbit run`` and ``ribbit gates`` read the repository's committed ``.ribbit.yml``
as the solve job does (``ribbit envs build``: tests/integration/test_trainer_cli.py):
its ``setup`` runs in the set-up environment (the venv) before the agent or the tests,
and its ``test`` is the command the gate runs. The setup leaves a marker that only it
writes; the repository's conftest fails every test without it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.fakes import make_git_repo, record_replay
from tests.plugins.e2e import xml_call
from tests.support import require_service
from tests.unit.worker.gates.helpers import make_patch
from worker.agent import read_jsonl
from worker.agent.cli import run
from worker.gates.cli import gates_command

pytestmark = pytest.mark.integration

SETUP = 'echo "set-up by .ribbit.yml" > "$VIRTUAL_ENV/marker"'
TEST = "python -m pytest -q -p no:cacheprovider"
CONFTEST = (
    "import os\n\n\ndef pytest_configure(config):\n"
    "    with open(os.environ['VIRTUAL_ENV'] + '/marker') as f:\n"
    "        assert f.read() == 'set-up by .ribbit.yml\\n'\n"
)
FILES = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "tests/test_calc.py": "from calc import add\n\n\ndef test_zero():\n    assert add(1, 0) == 1\n",
    "conftest.py": CONFTEST,
    ".ribbit.yml": f"setup: '{SETUP}'\ntest: {TEST}\n",
}


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    require_service(shutil.which("bwrap") is not None, "bubblewrap")
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RIBBIT_SANDBOX__SETUP_NETWORK", "false")  # the setup fetches nothing
    repo = tmp_path / "calc"
    make_git_repo(repo, FILES)
    return repo


def test_ribbit_gates_runs_the_ribbit_yml_setup_and_test_command(
    repo: Path, tmp_path: Path
) -> None:
    patch = tmp_path / "fix.diff"
    patch.write_text(
        make_patch(
            repo,
            {
                "calc.py": "def add(a, b):\n    return a + b\n",
                "tests/test_add.py": "from calc import add\n\n\ndef test_add():\n"
                "    assert add(2, 3) == 5\n",
            },
        )
    )
    args = ["--checkout", str(repo), "--patch", str(patch), "--backend", "bubblewrap", "--json"]
    result = CliRunner().invoke(gates_command, args)
    assert result.exit_code == 0, result.output
    tests = next(r for r in json.loads(result.output)["gates"] if r["name"] == "tests")
    details = tests["details"]
    assert (details["command"], details["command_source"]) == (TEST, ".ribbit.yml")
    # Two tests passed with the patch: conftest found the setup's marker in both runs.
    assert details["after"]["counts"]["passed"] == 2, tests["logs"]
    assert details["before"]["counts"]["passed"] == 1, tests["logs"]


def test_ribbit_run_sets_up_with_the_ribbit_yml_before_the_agent(
    repo: Path, tmp_path: Path
) -> None:
    look = xml_call("Bash", command='cat "$VIRTUAL_ENV/marker"')
    edit = xml_call("Edit", file_path="calc.py", old_string="a - b", new_string="a + b")
    replay = record_replay(repo, tmp_path / "recorded.jsonl", [look, edit, "Fixed."])
    issue = tmp_path / "issue.md"
    issue.write_text("# add() subtracts\n")
    out = tmp_path / "out.jsonl"
    args = ["--checkout", str(repo), "--issue-file", str(issue), "--replay", str(replay)]
    result = CliRunner().invoke(
        run, [*args, "--trajectory-out", str(out), "--backend", "bubblewrap"]
    )
    assert result.exit_code == 0, result.output
    assert "+    return a + b" in result.stdout
    [episode] = read_jsonl(out)
    [seen] = [o.content for t in episode.turns for o in t.observations if o.name == "Bash"]
    assert "set-up by .ribbit.yml" in seen
