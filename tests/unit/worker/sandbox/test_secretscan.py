"""Finding set-up credentials in snapshots: every encoding a copy could take, in a
streamed file, a name or a link, and never the value in a message."""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path
from urllib.parse import quote

import pytest

from worker.sandbox.secretscan import (
    MIN_SECRET_BYTES,
    SecretInSnapshot,
    SecretScanner,
    credential_digest,
    encoded_forms,
    secret_values,
)

TOKEN = "npm_Zx81q/Pw+Tk3=Lm0Ab9"
NPMRC = f"registry=https://npm.example.com/\n//npm.example.com/:_authToken={TOKEN}\n".encode()
USER, PASSWORD = "ribbit-ci", "s3cr3t-Pa55/word"
NPMRC_BASIC = (
    f"//npm.example.com/:username={USER}\n"
    f"//npm.example.com/:_password={base64.b64encode(PASSWORD.encode()).decode()}\n"
).encode()
PIP_CONF = f"[global]\nindex-url = https://{USER}:{quote(PASSWORD, safe='')}@pypi.example/simple\n"
NETRC = f"machine pypi.example login {USER} password {PASSWORD}\n".encode()


def scanner(**files: bytes) -> SecretScanner:
    return SecretScanner.from_credentials(files)


def _b64_variants(data: bytes) -> list[bytes]:
    """``data`` base64-encoded inside a longer text at each alignment, both alphabets,
    with and without padding."""
    out = []
    for prefix in (b"", b"x", b"xy"):
        for suffix in (b"", b"!", b"!?"):
            raw = prefix + data + suffix
            for enc in (base64.b64encode(raw), base64.urlsafe_b64encode(raw)):
                out += [b"header " + enc + b" trailer", enc.rstrip(b"=")]
    return out


@pytest.mark.parametrize("encoded", _b64_variants(TOKEN.encode()))
def test_base64_at_every_alignment_and_alphabet_is_found(encoded: bytes) -> None:
    assert scanner(npmrc=NPMRC).search(encoded) == "npmrc"


@pytest.mark.parametrize(
    "encoded",
    [
        TOKEN.encode(),
        TOKEN.encode().hex().encode(),
        TOKEN.encode().hex().upper().encode(),
        quote(TOKEN, safe="").encode(),
        re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), quote(TOKEN, safe="")).encode(),
        b"prefix" + TOKEN.encode() + b"suffix",
    ],
    ids=["plain", "hex", "HEX", "url", "url-lower", "embedded"],
)
def test_plain_hex_and_url_encodings_are_found(encoded: bytes) -> None:
    assert scanner(npmrc=NPMRC).search(encoded) == "npmrc"


def test_npm_auth_form_of_user_and_password_is_found() -> None:
    auth = base64.b64encode(f"{USER}:{PASSWORD}".encode())
    found = scanner(npmrc=NPMRC_BASIC)
    assert found.search(b"_auth=" + auth) == "npmrc"
    assert found.search(PASSWORD.encode()) == "npmrc"  # _password is stored in base64
    # And the other way round: an _auth line yields its password.
    npm_auth = b"//npm.example.com/:_auth=" + auth + b"\n"
    assert scanner(npmrc=npm_auth).search(PASSWORD.encode()) == "npmrc"


def test_pip_url_password_and_netrc_are_found() -> None:
    assert scanner(**{"pip.conf": PIP_CONF.encode()}).search(PASSWORD.encode()) == "pip.conf"
    basic = base64.b64encode(f"{USER}:{PASSWORD}".encode())
    assert scanner(netrc=NETRC).search(b"Authorization: Basic " + basic) == "netrc"


def test_public_parts_of_a_credential_file_are_not_needles() -> None:
    found = scanner(npmrc=NPMRC, netrc=NETRC)
    assert found.search(b"registry=https://npm.example.com/") is None
    assert found.search(USER.encode()) is None  # a user name alone is no secret
    assert found.search(b"machine pypi.example") is None


def test_values_too_short_to_search_for_are_skipped() -> None:
    short = b"//h/:_authToken=" + b"a" * (MIN_SECRET_BYTES - 1) + b"\n"
    assert scanner(npmrc=short).pattern is None


def test_unrecognised_file_counts_every_value() -> None:
    assert secret_values(b"custom = Qm9vT4kQ2xxx\n") == [b"Qm9vT4kQ2xxx"]


def test_encoded_forms_hold_no_empty_needle() -> None:
    assert b"" not in encoded_forms(b"abcdefgh")


def _tree(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def test_tree_hit_names_the_file_never_the_value(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"lib/ok.py": b"print(1)\n", "node_modules/x/.npmrc": NPMRC})
    with pytest.raises(SecretInSnapshot) as err:
        scanner(npmrc=NPMRC).check_tree(root, "/workspace")
    message = str(err.value)
    assert "/workspace/node_modules/x/.npmrc" in message
    assert "`npmrc`" in message
    for form in encoded_forms(TOKEN.encode()):
        assert form.decode("latin-1") not in message


def test_value_split_across_read_chunks_is_found(tmp_path: Path) -> None:
    from worker.sandbox import secretscan

    offset = secretscan._CHUNK - len(TOKEN) // 2
    root = _tree(tmp_path, {"big.bin": b"\0" * offset + TOKEN.encode() + b"\0" * 10})
    with pytest.raises(SecretInSnapshot):
        scanner(npmrc=NPMRC).check_tree(root, "/opt/ribbit")


def test_name_and_link_target_are_searched_and_redacted(tmp_path: Path) -> None:
    named = tmp_path / "named"
    _tree(named, {f"cache/{TOKEN.replace('/', '_')}": b""})
    found = scanner(npmrc=f"//h/:_authToken={TOKEN.replace('/', '_')}\n".encode())
    with pytest.raises(SecretInSnapshot) as err:
        found.check_tree(named, "/opt/ribbit")
    assert TOKEN.replace("/", "_") not in str(err.value)
    linked = tmp_path / "linked"
    linked.mkdir()
    os.symlink(f"/nowhere/{TOKEN}", linked / "link")
    with pytest.raises(SecretInSnapshot):
        scanner(npmrc=NPMRC).check_tree(linked, "/workspace")


def test_clean_tree_and_no_credentials_pass(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"a.txt": b"nothing here", "b/c.txt": USER.encode()})
    scanner(npmrc=NPMRC).check_tree(root, "/workspace")
    scanner().check_tree(_tree(tmp_path / "x", {"n": NPMRC}), "/workspace")


def test_redact_withholds_every_form() -> None:
    auth = base64.b64encode(TOKEN.encode()).decode()
    out = scanner(npmrc=NPMRC).redact(f"token {TOKEN} then {auth}")
    assert TOKEN not in out and auth.rstrip("=") not in out
    assert out.count("[credential withheld]") == 2


def test_credential_digest_names_the_set_not_the_values() -> None:
    assert credential_digest({}) is None
    one = credential_digest({"npmrc": NPMRC})
    assert one is not None and TOKEN not in one
    assert one != credential_digest({"npmrc": NPMRC_BASIC})
    assert one != credential_digest({"netrc": NPMRC})


@pytest.mark.parametrize(
    "public",
    [
        b"//registry.npmjs.org/:_authToken=${NPM_TOKEN}\nalways-auth=true\n",
        b"[global]\nindex-url = https://pypi.org/simple\ntrusted-host = pypi.example.com\n",
    ],
    ids=["npm-variable", "pip-public-index"],
)
def test_what_is_plainly_no_secret_is_not_searched_for(public: bytes) -> None:
    # Many packages' READMEs say `_authToken=${NPM_TOKEN}`; pip's code names pypi.org.
    assert scanner(npmrc=public).pattern is None


def test_a_token_as_a_urls_user_is_found() -> None:
    conf = b"[global]\nextra-index-url = https://tok_ABCDEFGH12@pkgs.example/simple\n"
    assert scanner(**{"pip.conf": conf}).search(b"x tok_ABCDEFGH12 y") == "pip.conf"


def test_a_host_name_carrying_a_value_in_any_case_is_withheld() -> None:
    found = scanner(npmrc=NPMRC)
    hex_host = TOKEN.encode().hex() + ".evil.example"
    assert found.withhold(hex_host.upper()) == "[credential withheld]"
    assert found.withhold("npm_zx81q.evil.example") == "npm_zx81q.evil.example"  # too short
    assert found.withhold("registry.npmjs.org") == "registry.npmjs.org"
