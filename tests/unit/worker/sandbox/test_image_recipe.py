"""The sandbox image's two recipes (deploy/sandbox/): build-image.sh (debootstrap, for
Podman hosts and CI) and the Dockerfile (Docker hosts) must build the same image, and
only the first is built by the tests."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

SANDBOX = Path(__file__).resolve().parents[4] / "deploy" / "sandbox"


def _script_packages() -> list[str]:
    text = (SANDBOX / "build-image.sh").read_text()
    found = re.search(r"^packages=\((.*?)\)", text, re.S | re.M)
    assert found, "build-image.sh: no packages=(...) list"
    return sorted(shlex.split(found.group(1)))


def _dockerfile_packages() -> list[str]:
    text = (SANDBOX / "Dockerfile").read_text().replace("\\\n", " ")
    found = re.search(r"apt-get install -y --no-install-recommends (.*?)&&", text)
    assert found, "Dockerfile: no apt-get install line"
    return sorted(shlex.split(found.group(1)))


def test_both_recipes_install_the_same_debian_packages() -> None:
    assert _script_packages() == _dockerfile_packages()
    assert "nodejs" in _script_packages()


def test_both_recipes_add_npm_with_the_one_pinned_installer() -> None:
    installer = (SANDBOX / "install-npm.sh").read_text()
    assert re.search(r"^integrity=sha512-\S{86}==$", installer, re.M), "npm is pinned by hash"
    assert 'bash "$here/install-npm.sh" "$rootfs"' in (SANDBOX / "build-image.sh").read_text()
    assert "install-npm.sh /" in (SANDBOX / "Dockerfile").read_text()


def test_python_byte_code_is_not_stripped() -> None:
    for recipe in ("build-image.sh", "Dockerfile"):
        for line in (SANDBOX / recipe).read_text().splitlines():
            if not line.lstrip().startswith("#"):
                assert "__pycache__" not in line and ".pyc" not in line, (recipe, line)
