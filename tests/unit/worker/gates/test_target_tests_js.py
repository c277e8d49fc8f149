"""Target tests in JavaScript and TypeScript: the ``it``/``test`` call around a line the
patch adds, and which reported case is that test (jest's JSON ids, vitest's junit)."""

from __future__ import annotations

import pytest

from worker.gates.junit import TestCase
from worker.gates.targets import TargetTest, _enclosing_js_test, _matches

# Shaped like kelektiv/node-cron's tests/cron.test.js (tabs) and merge-anything's
# test/index.test.ts (spaces, top-level tests).
JEST = """\
const sinon = require('sinon');

function helper() {
\treturn 1;
}

describe('cron', () => {
\tconst shared = 1;

\tdescribe('setTime', () => {
\t\tit('should start, stop, change time, not start again', () => {
\t\t\tconst job = new cron.CronJob('* * * * * *', callback);
\t\t\tif (job) {
\t\t\t\tjob.start();
\t\t\t}
\t\t\t// a comment
\t\t\texpect(callback).toHaveBeenCalledTimes(1);
\t\t});

\t\ttest.only("it's \\"quoted\\"", () => {
\t\t\texpect(1).toBe(1);
\t\t});

\t\tit(`row ${n}`, () => {
\t\t\texpect(n).toBe(n);
\t\t});
\t});
});
"""

VITEST = """\
import { expect, test } from 'vitest'
import { merge } from '../src/index'

test('prototype pollution', () => {
  const maliciousPayload = JSON.parse('{"__proto__": { "isAdmin": true }}')
  expect(merge({}, maliciousPayload).isAdmin).toBeUndefined()
})
"""


def _line(text: str, needle: str) -> int:
    [n] = [i for i, line in enumerate(text.splitlines(), 1) if needle in line]
    return n


@pytest.mark.parametrize(
    ("text", "needle", "expected"),
    [
        (JEST, "new cron.CronJob", "should start, stop, change time, not start again"),
        (JEST, "\t\t\t\tjob.start();", "should start, stop, change time, not start again"),
        (JEST, "toHaveBeenCalledTimes(1)", "should start, stop, change time, not start again"),
        (JEST, "it('should start", "should start, stop, change time, not start again"),
        (JEST, "expect(1).toBe(1)", 'it\'s "quoted"'),
        (JEST, "// a comment", None),  # a comment changes no test
        (JEST, "const shared = 1", None),  # in a describe block, not a test
        (JEST, "\treturn 1;", None),  # a helper is no test
        (JEST, "const sinon", None),
        (JEST, "expect(n).toBe(n)", None),  # a template title has no fixed name
        (VITEST, "maliciousPayload = JSON", "prototype pollution"),
        (VITEST, "test('prototype pollution'", "prototype pollution"),
        (VITEST, "import { merge }", None),
    ],
)
def test_enclosing_js_test(text: str, needle: str, expected: str | None) -> None:
    lines = text.splitlines()
    assert _enclosing_js_test(lines, _line(text, needle)) == expected


def test_blank_lines_and_out_of_range_lines_name_no_test() -> None:
    lines = JEST.splitlines()
    assert _enclosing_js_test(lines, lines.index("") + 1) is None
    assert _enclosing_js_test(lines, 0) is None
    assert _enclosing_js_test(lines, len(lines) + 1) is None


def _case(classname: str, name: str) -> TestCase:
    return TestCase(f"{classname}::{name}", name, classname, "passed")


CRON, MERGE = "tests/cron.test.js", "test/index.test.ts"
SERIALIZE = "test/serialize.js"
DOMAIN = 'cookie.serialize(name, value, options) with "domain" option'


@pytest.mark.parametrize(
    ("case", "path", "target", "expected"),
    [
        # jest --json: the describe blocks and the title joined by spaces.
        (_case(CRON, "cron setTime runs once"), CRON, "runs once", True),
        (_case(CRON, "runs once"), CRON, "runs once", True),
        (_case("tests/other.test.js", "cron setTime runs once"), CRON, "runs once", False),
        (_case(CRON, "cron setTime reruns once"), CRON, "runs once", False),
        # vitest's junit: joined by " > ".
        (_case(MERGE, "merge > prototype pollution"), MERGE, "prototype pollution", True),
        (_case(MERGE, "prototype pollution 2"), MERGE, "prototype pollution", False),
        # node --test's junit names no file: its classname is "test".
        (_case("test", "suite > prototype pollution"), MERGE, "prototype pollution", True),
        # mocha's xunit names no file: its classname is the describe blocks' titles
        # (jshttp/cookie's test/serialize.js), its name the test's title alone.
        (
            _case(DOMAIN, "should serialize valid domain"),
            SERIALIZE,
            "should serialize valid domain",
            True,
        ),
        (
            _case(DOMAIN, "should serialize valid domains"),
            SERIALIZE,
            "should serialize valid domain",
            False,
        ),
        # A path for a classname is jest's or vitest's: another file, another test.
        (
            _case(CRON, "should serialize valid domain"),
            SERIALIZE,
            "should serialize valid domain",
            False,
        ),
    ],
)
def test_js_cases_match_their_target(
    case: TestCase, path: str, target: str, expected: bool
) -> None:
    assert _matches(case, TargetTest(name=target, path=path)) is expected
