"""CHAP secrets: read from files on the controller, refused when exposed or weak."""

from __future__ import annotations

from pathlib import Path

import pytest

from remirror.controller import read_secrets
from remirror.errors import RemirrorError
from remirror.profile import parse_profile
from tests.conftest import PROFILES


def profile_with_secrets(tmp_path: Path) -> tuple[Path, Path, str]:
    secret, mutual = tmp_path / "s.chap", tmp_path / "s.chap.mutual"
    text = (PROFILES / "lab.yaml").read_text().replace("/etc/remirror/lab/lab0.chap", str(secret))
    return secret, mutual, text


def test_secrets_are_read_from_their_files(tmp_path: Path) -> None:
    secret, mutual, text = profile_with_secrets(tmp_path)
    for path, value in ((secret, "initiator-secret-1\n"), (mutual, "target-secret-22\n")):
        path.write_text(value)
        path.chmod(0o600)
    assert read_secrets(parse_profile(text, "lab.yaml")) == {
        str(secret): "initiator-secret-1",
        str(mutual): "target-secret-22",
    }


def test_a_secret_readable_by_others_is_refused_with_where_it_is_named(tmp_path: Path) -> None:
    secret, mutual, text = profile_with_secrets(tmp_path)
    secret.write_text("initiator-secret-1\n")
    secret.chmod(0o644)
    mutual.write_text("target-secret-22\n")
    mutual.chmod(0o600)
    with pytest.raises(RemirrorError) as caught:
        read_secrets(parse_profile(text, "lab.yaml"))
    assert str(caught.value) == (
        f"lab.yaml:35:9: secret file {secret} is readable by others (mode 644): chmod 600 it"
    )


@pytest.mark.parametrize("value", ["short", "has a space in it", ""])
def test_weak_or_malformed_secrets_are_refused(tmp_path: Path, value: str) -> None:
    secret, mutual, text = profile_with_secrets(tmp_path)
    for path in (secret, mutual):
        path.write_text(value)
        path.chmod(0o600)
    with pytest.raises(RemirrorError, match="must be 12 to 255 characters without spaces"):
        read_secrets(parse_profile(text, "lab.yaml"))


def test_a_missing_secret_file_is_one_line(tmp_path: Path) -> None:
    _, _, text = profile_with_secrets(tmp_path)
    with pytest.raises(
        RemirrorError, match=r"^lab.yaml:35:9: cannot read secret file .*: No such file or directory$"
    ):
        read_secrets(parse_profile(text, "lab.yaml"))
