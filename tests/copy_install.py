"""A project whose set-up installs a copy of its package (``pip install .``, not ``-e``),
with a build backend of its own (``backend-path``): every test sandbox installs the copy
again from its own tree before the tests (worker/sandbox/envcache.py), running that
tree's build code, and the tests import the copy from site-packages. Used by
tests/integration/test_startup_forgery.py and tests/unit/worker/gates/test_startup.py,
test_watch_copies.py; :class:`OwnVenvSandbox` gives the host-copy sandbox a virtual
environment of its own, as a real sandbox has /opt/ribbit/venv.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.fakes import LocalDirSandbox

BACKEND = '''"""A build backend of the project's own: a wheel of calc.py, made by hand."""

import base64
import hashlib
import zipfile

NAME, VERSION = "calc", "1.0"
INFO = f"{NAME}-{VERSION}.dist-info"


def _hash(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode()}"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name = f"{NAME}-{VERSION}-py3-none-any.whl"
    meta = f"Metadata-Version: 2.1\\nName: {NAME}\\nVersion: {VERSION}\\n"
    files = {
        "calc.py": open("calc.py", "rb").read(),
        f"{INFO}/METADATA": meta.encode(),
        f"{INFO}/WHEEL": b"Wheel-Version: 1.0\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
    }
    record = "".join(f"{path},{_hash(data)},{len(data)}\\n" for path, data in files.items())
    record += f"{INFO}/RECORD,,\\n"
    with zipfile.ZipFile(f"{wheel_directory}/{name}", "w") as whl:
        for path, data in files.items():
            whl.writestr(path, data)
        whl.writestr(f"{INFO}/RECORD", record)
    return name
'''
PYPROJECT = '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
COPY_INSTALL = "pip install --no-build-isolation --no-deps --no-index ."


def copy_installed(calc: str) -> dict[str, str]:
    """The project's files, ``calc.py`` being ``calc``."""
    return {"pyproject.toml": PYPROJECT, "backend.py": BACKEND, "calc.py": calc}


def make_venv(root: Path, *, system: bool = False) -> Path:
    """A virtual environment made by the host's python3 (no pip of its own: quick; with
    ``system`` it sees the host's site-packages, pytest and pip among them)."""
    args = ["python3", "-m", "venv", "--without-pip", str(root)]
    subprocess.run([*args, *(["--system-site-packages"] if system else [])], check=True)
    return root


class OwnVenvSandbox(LocalDirSandbox):
    """The host-copy sandbox with a fresh virtual environment first on PATH (over the
    host's site-packages), at ``venv`` for every sandbox of a test (they run one after
    another, so a path in it reads the same in each), as each real sandbox has
    /opt/ribbit/venv."""

    def __init__(self, source: Path, venv: Path) -> None:
        super().__init__(source)
        shutil.rmtree(venv, ignore_errors=True)
        self.venv = make_venv(venv, system=True)

    def own_environment(self) -> dict[str, str]:
        return {"PATH": f"{self.venv / 'bin'}:{os.environ['PATH']}"}
