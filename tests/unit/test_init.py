"""`remirror init`: the profile it writes (remirror.profile.starter) and what it refuses before
it writes anything (remirror.onboarding). Its whole run, keys and all, is the hosts' lab's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from remirror.cli import main
from remirror.errors import UsageError
from remirror.profile.identity import Here, site_here
from remirror.profile.starter import Starter, site_name, starter_profile, starter_text

ANSWERS = Starter(
    name="data",
    primary_host="files.example.net",
    primary_disk="/dev/disk/by-id/ata-EXAMPLE_DISK_0001",
    dr_host="backup.example.net",
    dr_disk="/dev/disk/by-id/ata-EXAMPLE_DISK_0002",
    dr_address="192.0.2.20",  # what backup.example.net resolves to at the primary
)


@pytest.mark.parametrize(
    ("host", "name"),
    [
        ("files.example.net", "files"),
        ("Files-1.acme.example", "files-1"),
        ("backup_7", "backup-7"),
        ("198.51.100.20", "198-51-100-20"),
        ("2001:db8::7", "2001-db8-7"),
    ],
)
def test_a_site_is_named_after_its_host(host: str, name: str) -> None:
    assert site_name(host) == name


def test_the_profile_is_one_file_in_which_each_host_finds_itself() -> None:
    profile = starter_profile(ANSWERS)
    assert list(profile.sites) == ["files", "backup"]
    assert not [name for name, site in profile.sites.items() if site.is_local]
    assert site_here(profile, Here(hostname="files")) == "files"
    assert site_here(profile, Here(hostname="backup.example.net")) == "backup"
    mirror = profile.mirrors[0]
    assert (mirror.name, mirror.md_device) == ("data", "/dev/md/data")
    assert mirror.replicas[0].portal is not None
    assert str(mirror.replicas[0].portal) == "192.0.2.20:3260"
    assert mirror.replication.mode == "sync"
    assert mirror.iscsi.chap is None  # apply makes the CHAP secrets
    assert profile.sites["backup"].ssh is not None
    assert str(profile.sites["backup"].ssh.identity_file) == "/etc/remirror/id_ed25519"


def test_async_takes_a_write_behind_and_two_hosts_named_alike_are_told_apart() -> None:
    answers = Starter(
        name="db",
        primary_host="nas.hq.example",
        primary_disk="/dev/sdb",
        dr_host="nas.dr.example",
        dr_disk="/dev/sdc",
        mode="async",
        dr_address="2001:db8::20",
    )
    profile = starter_profile(answers)
    assert list(profile.sites) == ["nas-a", "nas-b"]
    assert profile.mirrors[0].replication.mode == "async"
    assert profile.mirrors[0].replication.write_behind == 4096
    assert "# Written by `remirror init`." in starter_text(answers)


def test_with_yes_every_answer_must_be_given(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["init", "--yes", "--primary", "files", "--dr", "backup"])
    assert done.value.code == 3
    assert capsys.readouterr().err.strip() == "remirror: --primary-disk is needed with --yes"


def test_an_existing_profile_or_a_disk_that_is_not_one_is_refused_and_nothing_is_written(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    existing = tmp_path / "data.yaml"
    existing.write_text("mine\n")
    args = ["init", "--yes", "--primary", "files", "--primary-disk", str(tmp_path / "nodisk")]
    args += ["--dr", "backup", "--dr-disk", "/dev/sdc"]
    with pytest.raises(SystemExit) as done:
        main([*args, "--profile", str(existing)])
    assert done.value.code == 3
    assert f"{existing} exists: remove it first, or give another --profile" in capsys.readouterr().err
    assert existing.read_text() == "mine\n"
    with pytest.raises(SystemExit) as done:
        main([*args, "--profile", str(tmp_path / "new.yaml")])
    assert done.value.code == 3
    assert "--primary-disk" in capsys.readouterr().err
    regular = tmp_path / "file"
    regular.write_text("")
    args[5] = str(regular)
    with pytest.raises(SystemExit) as done:
        main([*args, "--profile", str(tmp_path / "new.yaml")])
    assert f"--primary-disk {regular}: not a block device" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.yaml", "file"]


@pytest.mark.parametrize(
    ("change", "option", "why"),
    [
        ({"dr_disk": "/dev/disk/by-id/a,b"}, "--dr-disk", "no spaces, quotes, commas"),
        ({"dr_disk": "/dev/sdc, iqn: x"}, "--dr-disk", "no spaces, quotes, commas"),
        ({"primary_disk": "sdb"}, "--primary-disk", "is not a device path under /dev/"),
        ({"name": "my data"}, "--name", "is not a valid name"),
        ({"dr_host": "-oProxyCommand=x"}, "--dr", "is not an IP address or host name"),
    ],
)
def test_an_answer_that_is_not_what_it_names_is_refused_by_its_option(
    change: dict[str, str], option: str, why: str
) -> None:
    from dataclasses import replace

    from remirror.profile.starter import check_answers

    answers = replace(ANSWERS, **change)  # type: ignore[arg-type] # str fields only
    problems = check_answers(answers)
    assert list(problems) == [option]
    assert why in problems[option]
    with pytest.raises(ValueError, match=f"^{option}: "):
        starter_profile(answers)


def test_known_hosts_gets_each_hosts_key_once_and_another_key_for_a_name_is_refused(tmp_path: Path) -> None:
    from remirror.errors import UsageError
    from remirror.onboarding import _known_hosts

    path = tmp_path / "known_hosts"
    keys = {"files": ["ssh-ed25519", "AAAA1"], "backup": ["ssh-ed25519", "AAAA2"]}
    text = _known_hosts(keys, path)
    assert text == "files ssh-ed25519 AAAA1\nbackup ssh-ed25519 AAAA2\n"
    path.write_text(text)
    assert _known_hosts(keys, path) == text  # again: nothing added
    with pytest.raises(UsageError, match="holds another key for backup"):
        _known_hosts({**keys, "backup": ["ssh-ed25519", "EVIL"]}, path)


def test_the_same_host_twice_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    args = ["init", "--yes", "--primary", "files", "--primary-disk", "/dev/sdb", "--dr", "FILES"]
    with pytest.raises(SystemExit) as done:
        main([*args, "--dr-disk", "/dev/sdc", "--profile", str(tmp_path / "p.yaml")])
    assert done.value.code == 3
    assert "--primary and --dr are the same host (files)" in capsys.readouterr().err


def test_the_dr_hosts_name_becomes_the_address_it_resolves_to_here_for_its_portal() -> None:
    from remirror.onboarding import resolve_dr_address as dr_address

    assert dr_address("192.0.2.20") == "192.0.2.20"
    with pytest.raises(UsageError, match=r"--dr localhost: resolves here to .*127\.0\.0\.1.*--dr-address"):
        dr_address("localhost")  # as a host's own name resolves on it: never the DR host's
    with pytest.raises(UsageError, match="fe80::1"):
        dr_address("fe80::1")
    with pytest.raises(UsageError, match=r"--dr no-such-host.invalid: does not resolve here .* --dr-address"):
        dr_address("no-such-host.invalid")
    with pytest.raises(ValueError, match="--dr-address: 'backup' is not an IP address"):
        starter_profile(replace(ANSWERS, dr_address="backup"))
