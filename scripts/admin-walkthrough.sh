#!/usr/bin/env bash
# The admin walkthrough of trainer/README.md ("Walkthrough: split, train, score, promote,
# delete"), run for real on a fresh data dir: three merged fixes of a toy repository
# become environments, the newest is held out, one GRPO step trains a candidate, the
# candidate is scored and (refused, then forced) promoted, and deleting the repository's
# data revokes it. tests/integration/test_admin_walkthrough.py runs this script and checks
# that the README shows the commands it runs and the lines they print.
#
#   scripts/admin-walkthrough.sh [WORK_DIR]
#
# WORK_DIR (default: a new temporary folder) must not exist yet; everything lands in it,
# RIBBIT_DATA_DIR included, so nothing of an existing installation is read or changed.
# MODEL: the base model (a path or hub id); unset, the tiny random model the tests build
# (tests/plugins/models.py), which solves nothing but runs every step on a CPU in seconds.
# PYTHON: the interpreter with Ribbit installed (default: .venv/bin/python).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
WORK=${1:-$(mktemp -d -u "${TMPDIR:-/tmp}/ribbit-walkthrough.XXXXXX")}
mkdir "$WORK"
WORK=$(cd "$WORK" && pwd)
cd "$WORK"

# A fresh installation: its own data dir (SQLite, the environment store), and
# bubblewrap as the sandbox, which needs no image (set RIBBIT_SANDBOX__BACKEND to change).
export RIBBIT_DATA_DIR=$WORK/data
export RIBBIT_SANDBOX__BACKEND=${RIBBIT_SANDBOX__BACKEND:-bubblewrap}
# Fixed author, committer and dates: the toy repository's shas, and so the environment
# ids and the README's output, are the same on every run.
export GIT_AUTHOR_NAME=Admin GIT_AUTHOR_EMAIL=admin@example.com
export GIT_COMMITTER_NAME=Admin GIT_COMMITTER_EMAIL=admin@example.com
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}

ribbit() { "$PY" -m bot "$@"; }

# Echo each walkthrough command as "$ command" before running it: the output is a
# transcript whose command lines are the README's.
# An argument with a space or a quote is shown in double quotes, as one would type it.
step() {
    local shown="" arg
    for arg in "$@"; do
        case $arg in
            *[[:space:]\'\"]* | "") shown+=" \"$arg\"" ;;
            *) shown+=" $arg" ;;
        esac
    done
    printf '$%s\n' "$shown"
    "$@"
}

commit_at() {  # commit_at DAY MESSAGE: commit everything, dated 2026-01-DAY
    local date="2026-01-${1}T12:00:00+00:00"
    git add -A
    GIT_AUTHOR_DATE=$date GIT_COMMITTER_DATE=$date git commit -q -m "$2"
}

write_calc() {  # write_calc ADD MUL NEG: calc.py with these three return expressions
    printf 'def add(a, b):\n    return %s\n\n\ndef mul(a, b):\n    return %s\n\n\ndef neg(a):\n    return %s\n' \
        "$1" "$2" "$3" >calc.py
}

write_test() {  # write_test NAME CALL EXPECTED: tests/test_NAME.py asserting CALL == EXPECTED
    printf 'from calc import %s\n\n\ndef test_%s():\n    assert %s == %s\n' "$1" "$1" "$2" "$3" \
        >"tests/test_$1.py"
}

make_toy_repository() {  # calc/: three bugs, fixed one a day, each fix with its test
    mkdir -p calc/tests && cd calc
    git init -q -b main
    write_calc "a - b" "a + b" "a"
    printf 'def test_imports():\n    import calc  # noqa: F401\n' >tests/test_smoke.py
    commit_at 01 "calc: add, mul, neg"
    write_calc "a + b" "a + b" "a" && write_test add "add(2, 3)" 5
    commit_at 02 "Fix add: it subtracted"
    write_calc "a + b" "a * b" "a" && write_test mul "mul(2, 3)" 6
    commit_at 03 "Fix mul: it added"
    write_calc "a + b" "a * b" "-a" && write_test neg "neg(2)" -2
    commit_at 04 "Fix neg: it returned its argument"
    cd ..
}

make_toy_repository
mkdir issues
printf 'add is wrong\n\nadd(2, 3) returns -1\n' >issues/add.md
printf 'mul is wrong\n\nmul(2, 3) returns 5\n' >issues/mul.md
printf 'neg is wrong\n\nneg(2) returns 2\n' >issues/neg.md
if [ -z "${MODEL:-}" ]; then
    "$PY" -c 'import sys; from tests.plugins.models import build_tiny_model; build_tiny_model(__import__("pathlib").Path(sys.argv[1]))' tiny-model
    MODEL=tiny-model
fi
step git -C calc log --format="%h %ad %s" --date=short

# 1. Environments from the three fixes, for the default line (public GitHub repositories).
step ribbit data visibility --forge github --repo acme/calc --public --actor admin
for fix in add mul neg; do
    sha=$(git -C calc rev-parse --short ":/Fix $fix")
    base=$(git -C calc rev-parse --short "$sha^")
    step ribbit envs build --checkout calc --base "$base" --fix "$sha" --issue-file "issues/$fix.md" \
        --name acme/calc --forge github --test-command "python3 -m pytest -q -p no:cacheprovider" \
        --reruns 1
done
# 2. Hold out each repository's newest fix.
step ribbit envs split --count 1
step ribbit envs list
# 3. One GRPO step on the train split, registered as a candidate and scored beside the base.
step ribbit train --model "$MODEL" --envs all --steps 1 --group-size 2 --max-turns 2 \
    --max-new-tokens 32 --output-dir run --register cand1 --heldout split:heldout
# 4. Score it on the held-out split (stored with the version; promotion compares it).
step ribbit model evaluate cand1 --k 1 --max-turns 2 --max-new-tokens 32
step ribbit model list
# 5. Promote: refused without the evidence; forced, the audit row says what was skipped.
step ribbit model promote cand1 --actor admin || echo "(exit status $?)"
step ribbit model promote cand1 --force --actor admin
# 6. Delete the repository's data: every version trained on it is revoked.
step ribbit data delete --forge github --repo acme/calc --yes --actor admin
step ribbit model list
