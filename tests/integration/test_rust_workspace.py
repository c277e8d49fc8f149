"""A Cargo workspace through ``ribbit gates`` on bubblewrap (the usual shape of a Rust
project past one crate: members in folders of their own).

cargo names each test binary's source relative to its package ("src/lib.rs",
"tests/it.rs"), so before 2026-12-08 two members' tests had the same ids: an honest fix
whose test lives in a member was **refused** ("the patch changes `twice_two` but the
test command did not run it": the target's path, app/tests/it.rs, matched no id), and
the `tests::it_works` of one crate (cargo new's own template) stood for both. The test
run now first asks cargo which package each binary belongs to
(worker/gates/testcmd.py ``_cargo_package_step``), and ids name the member's folder
(``app/tests/it.rs::twice_two``); a single crate's ids are unchanged.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.fakes import make_git_repo
from tests.support import GatesRun, require_service, run_gates
from tests.unit.worker.gates.helpers import make_patch

pytestmark = pytest.mark.integration

CALC = (
    "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n\n"
    "#[cfg(test)]\nmod tests {\n    use super::*;\n\n"
    "    #[test]\n    fn it_works() {\n        assert_eq!(add(1, 0), 1);\n    }\n{more}}\n"
)
APP = (
    "pub fn twice(a: i32) -> i32 {\n    calc::add(a, a)\n}\n\n"
    "#[cfg(test)]\nmod tests {\n    use super::*;\n\n"
    "    #[test]\n    fn it_works() {\n        assert_eq!(twice(0), 0);\n    }\n}\n"
)
WORKSPACE = {
    "Cargo.toml": '[workspace]\nmembers = ["calc", "app"]\nresolver = "2"\n',
    "calc/Cargo.toml": '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n',
    "calc/src/lib.rs": CALC.replace("{more}", ""),
    "app/Cargo.toml": (
        '[package]\nname = "app"\nversion = "0.1.0"\nedition = "2021"\n\n'
        '[dependencies]\ncalc = { path = "../calc" }\n'
    ),
    "app/src/lib.rs": APP,
    "app/tests/it.rs": "#[test]\nfn twice_zero() {\n    assert_eq!(app::twice(0), 0);\n}\n",
}
FIXED_CALC = "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n"


def _gates(tmp_path: Path, change: dict[str, str]) -> tuple[int, dict]:
    require_service(shutil.which("bwrap") is not None, "bubblewrap")
    require_service(shutil.which("cargo") is not None, "cargo")
    checkout = tmp_path / "ws"
    make_git_repo(checkout, WORKSPACE)
    patch = tmp_path / "change.diff"
    patch.write_text(make_patch(checkout, change))
    code, report = run_gates(GatesRun(checkout, patch, "add subtracts", tmp_path / "data"))
    assert "gates" in report, report
    return code, next(g for g in report["gates"] if g["name"] == "tests")


def test_an_honest_fix_with_tests_in_two_members_is_verified(tmp_path: Path) -> None:
    more = "\n    #[test]\n    fn two_three() {\n        assert_eq!(add(2, 3), 5);\n    }\n"
    fix = {
        "calc/src/lib.rs": CALC.replace("    a - b\n", "    a + b\n").replace("{more}", more),
        "app/tests/it.rs": WORKSPACE["app/tests/it.rs"]
        + "\n#[test]\nfn twice_two() {\n    assert_eq!(app::twice(2), 4);\n}\n",
    }
    code, tests = _gates(tmp_path, fix)
    assert code == 0, (tests["findings"], tests.get("logs", "")[-3000:])
    assert tests["evidence"] == ["app/tests/it.rs::twice_two", "calc/src/lib.rs::tests::two_three"]
    after = tests["details"]["after"]
    assert after["counts"]["passed"] == 5 and after["failing"] == []


def test_a_member_test_broken_behind_a_same_named_one_is_named(tmp_path: Path) -> None:
    # The fix makes twice(0) panic; calc's own it_works still passes. Each crate's
    # tests::it_works is a test of its own, so app's failure is the patch's.
    broken = APP.replace("    calc::add(a, a)\n", '    assert!(a != 0, "zero");\n    a * 2\n')
    code, tests = _gates(
        tmp_path, {"calc/src/lib.rs": CALC.replace("{more}", ""), "app/src/lib.rs": broken}
    )
    assert code == 1
    failing = tests["details"]["after"]["failing"]
    assert "app/src/lib.rs::tests::it_works" in failing, tests["details"]["after"]
    assert "calc/src/lib.rs::tests::it_works" not in failing
