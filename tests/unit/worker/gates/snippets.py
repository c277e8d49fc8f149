"""One insecure snippet per rule family (what a patch adds) and safe look-alikes that must
stay quiet. Keys are the ``family`` metadata of worker/gates/rules/*.yml."""

from __future__ import annotations

INSECURE: dict[str, str] = {
    "shell-injection": (
        "import os\nimport subprocess\n\n\n"
        "def archive(name):\n"
        '    subprocess.run(f"tar czf {name}.tgz data", shell=True)\n'
        '    os.system("rm -rf " + name)\n'
    ),
    "code-injection": ("def calc(expr):\n    return eval(expr)\n"),
    "evasion": (
        "import os\nimport subprocess\n\n\ndef run(cmd):\n"
        '    getattr(os, "system")(cmd)\n'
        "    f = subprocess.run\n    f(cmd, shell=True)\n"
    ),
    "unsafe-deserialization": (
        "import pickle\n\nimport yaml\n\n\n"
        "def load(blob, text):\n"
        "    return pickle.loads(blob), yaml.load(text)\n"
    ),
    "sql-injection": (
        "def find(conn, name):\n"
        "    cur = conn.cursor()\n"
        "    cur.execute(f\"SELECT * FROM users WHERE name = '{name}'\")\n"
        '    query = "DELETE FROM users WHERE id = %s" % name\n'
        "    cur.execute(query)\n"
    ),
    "tls-verification": (
        "import ssl\n\nimport requests\n\n\n"
        "def fetch(url):\n"
        "    ctx = ssl._create_unverified_context()\n"
        "    return requests.get(url, verify=False), ctx\n"
    ),
    "weak-crypto": (
        "import hashlib\n\nfrom Crypto.Cipher import DES\n\n\n"
        "def hash_password(password):\n"
        "    return hashlib.md5(password.encode()).hexdigest()\n\n\n"
        "def seal(key, data):\n"
        "    return DES.new(key, DES.MODE_ECB).encrypt(data)\n"
    ),
    "hardcoded-credentials": ('DB_PASSWORD = "s3cr3t-Pa55word"\napi_key = "k9Lw2QbX7rT4zP1m"\n'),
    "insecure-tempfile": (
        "import tempfile\n\n\n"
        "def scratch():\n"
        "    name = tempfile.mktemp()\n"
        '    with open("/tmp/ribbit-cache.txt", "w") as fh:\n'
        "        fh.write(name)\n"
    ),
    "assert-access-control": (
        "def delete_user(user, target):\n"
        '    assert user.is_admin, "admins only"\n'
        "    target.delete()\n"
    ),
    "path-traversal": (
        "import os\n\nfrom flask import Flask, request, send_file\n\n"
        'app = Flask(__name__)\nBASE = "/srv/files"\n\n\n'
        '@app.route("/download")\n'
        "def download():\n"
        '    name = request.args["name"]\n'
        "    with open(os.path.join(BASE, name)) as fh:\n"
        "        fh.read()\n"
        '    return send_file(request.args.get("path"))\n'
    ),
}

SAFE = (
    "import hashlib\nimport os\nimport pickle\nimport subprocess\nimport tempfile\n\n"
    "import yaml\n\n\n"
    "def fine(conn, name, text, data):\n"
    '    subprocess.run(["tar", "czf", name, "data"], check=True)\n'
    '    subprocess.run("ls -l", shell=True)\n'
    '    os.system("true")\n'
    '    conn.cursor().execute("SELECT * FROM users WHERE name = ?", (name,))\n'
    "    cfg = yaml.safe_load(text)\n"
    "    other = yaml.load(text, Loader=yaml.SafeLoader)\n"
    "    digest = hashlib.sha256(data).hexdigest()\n"
    "    etag = hashlib.md5(data).hexdigest()\n"
    "    fd, path = tempfile.mkstemp()\n"
    '    password = os.environ["DB_PASSWORD"]\n'
    '    token_url = "https://example.com/oauth/token"\n'
    "    blob = pickle.dumps(cfg)\n"
    "    again = pickle.loads(blob)\n"
    '    getattr(conn, "cursor")()\n'
    "    return cfg, other, digest, etag, fd, path, password, token_url, again\n"
)
