"""CHAP secrets: read from files on the controller, refused when exposed or weak."""

from __future__ import annotations

from pathlib import Path

import pytest

from remirror.controller import STAND_IN_SECRET, read_secrets
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


def test_a_mirror_without_chap_gets_secrets_generated_once_and_plan_makes_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import remirror.profile.model

    where = tmp_path / "chap"
    monkeypatch.setattr(remirror.profile.model, "GENERATED_CHAP_DIR", str(where))
    text = (PROFILES / "lab.yaml").read_text()
    start, end = text.index("      chap:\n"), text.index("      # The lab's own")
    profile = parse_profile(text[:start] + text[end:], "lab.yaml")
    files = [str(where / "lab.lab0"), str(where / "lab.lab0.mutual")]
    # plan changes nothing: a stand-in where the secrets would be.
    assert read_secrets(profile, "stand-in") == dict.fromkeys(files, STAND_IN_SECRET)
    assert not where.exists()
    made = read_secrets(profile)
    assert sorted(made) == files
    first, mutual = made.values()
    assert first != mutual  # RFC 3720: the two directions never share a secret
    assert len(first) == 32
    assert oct(where.stat().st_mode & 0o777) == "0o700"
    assert [oct(Path(f).stat().st_mode & 0o777) for f in files] == ["0o600", "0o600"]
    assert read_secrets(profile) == made == read_secrets(profile, "stand-in")  # kept, not made again
    # `chap: none`: no CHAP at all.
    none = parse_profile(text[:start] + "      chap: none\n" + text[end:], "lab.yaml")
    assert (none.replica_chap(none.mirrors[0]), read_secrets(none)) == (None, {})
