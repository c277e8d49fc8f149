"""Smart HTTP for the local forge: each git request runs ``git http-backend`` as CGI."""

from __future__ import annotations

import subprocess
from pathlib import Path

from werkzeug.wrappers import Request, Response


def needs_write(request: Request, rest: str) -> bool:
    """Pushes hit git-receive-pack; fetches and clones hit git-upload-pack."""
    return rest.endswith("git-receive-pack") or request.args.get("service") == "git-receive-pack"


def serve(
    request: Request, project_root: Path, repo_path: str, rest: str, remote_user: str
) -> Response:
    """Run http-backend for ``/<repo_path>/<rest>`` under ``project_root``."""
    env = {
        "PATH": "/usr/bin:/bin",
        "GIT_PROJECT_ROOT": str(project_root),
        "GIT_HTTP_EXPORT_ALL": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_NOSYSTEM": "1",
        "PATH_INFO": f"/{repo_path}/{rest}",
        "QUERY_STRING": request.query_string.decode(),
        "REQUEST_METHOD": request.method,
        "CONTENT_TYPE": request.headers.get("Content-Type", ""),
        "REMOTE_USER": remote_user,  # http-backend enables receive-pack only for a known user
        "REMOTE_ADDR": request.remote_addr or "127.0.0.1",
        "GIT_HTTP_MAX_REQUEST_BUFFER": "100M",
    }
    if request.headers.get("Content-Encoding"):
        env["HTTP_CONTENT_ENCODING"] = request.headers["Content-Encoding"]
    if request.headers.get("Git-Protocol"):
        env["GIT_PROTOCOL"] = request.headers["Git-Protocol"]
    body = request.get_data()
    env["CONTENT_LENGTH"] = str(len(body))
    proc = subprocess.run(
        ["git", "http-backend"], input=body, env=env, capture_output=True, check=False
    )
    head, _, payload = proc.stdout.partition(b"\r\n\r\n")
    if not _:
        head, _, payload = proc.stdout.partition(b"\n\n")
    status = 200
    headers: list[tuple[str, str]] = []
    for line in head.decode("latin-1").splitlines():
        if not line.strip():
            continue
        key, _, value = line.partition(":")
        if key.lower() == "status":
            status = int(value.strip().split()[0])
        else:
            headers.append((key.strip(), value.strip()))
    if proc.returncode != 0 and not proc.stdout:
        return Response(proc.stderr, status=500, content_type="text/plain")
    return Response(payload, status=status, headers=headers)
