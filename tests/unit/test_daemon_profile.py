"""Daemons follow their profile's file: one changed and applied is never worked against with the
text they started with (remirror.here.ProfileFile, reconcile's ProfileChanged)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import pytest

from remirror.controller import Controller
from remirror.daemons.cdp import run as run_points
from remirror.here import SITE_VARIABLE, ProfileFile
from remirror.profile.model import Profile
from remirror.reconcile import ProfileChanged, reconcile_once

SHIPPED = Path(__file__).parents[2] / "profiles" / "single-mirror.yaml"


@pytest.fixture
def profile_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(SITE_VARIABLE, "office")
    path = tmp_path / "office.yaml"
    path.write_text(SHIPPED.read_text())
    return path


def mode(profile: Profile) -> str:
    return profile.mirrors[0].replication.mode


def test_a_changed_file_is_loaded_again_once_and_said_in_the_journal(profile_file: Path) -> None:
    source, said = ProfileFile(profile_file), list[str]()
    assert mode(source.profile) == "sync"
    assert not source.changed()
    assert source.follow(mode, "as started", said.append) == "as started"
    assert said == []
    profile_file.write_text(
        profile_file.read_text().replace("name: data", "name: data\n    replication: {mode: async}")
    )
    assert source.changed()
    assert source.follow(mode, "as started", said.append) == "async"
    assert mode(source.profile) == "async"
    assert not source.changed()
    assert [json.loads(line) for line in said] == [{"event": "profile", "loaded": str(profile_file)}]


def test_text_that_no_longer_loads_leaves_the_daemon_on_the_profile_it_had(profile_file: Path) -> None:
    source, said = ProfileFile(profile_file), list[str]()
    good = profile_file.read_text()
    profile_file.write_text(good.replace("primary: {site: office", "primary: {site: attic"))
    assert source.follow(mode, "running", said.append) == "running"
    assert mode(source.profile) == "sync"
    (line,) = [json.loads(line) for line in said]
    assert line["event"] == "profile"
    assert "attic" in line["error"]
    assert "office.yaml:" in line["error"]
    assert not source.changed()  # said once: the next rounds run on, on what the sites run
    profile_file.write_text(good.replace("name: data", "name: data\n    replication: {mode: async}"))
    assert source.follow(mode, "running", said.append) == "async"  # the next change is taken


def test_what_the_daemon_builds_refusing_the_new_profile_keeps_the_old(profile_file: Path) -> None:
    source, said = ProfileFile(profile_file), list[str]()
    profile_file.write_text(profile_file.read_text() + "\n")

    def refuse(_profile: Profile) -> str:
        from remirror.errors import UsageError

        raise UsageError("cdp run: no mirror of the profile has `cdp`")

    assert source.follow(refuse, "points as before", said.append) == "points as before"
    assert "no mirror of the profile has `cdp`" in json.loads(said[0])["error"]


def test_the_site_file_and_the_host_name_are_what_it_was_loaded_from_too(
    profile_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    source = ProfileFile(profile_file)
    real = os.uname()
    renamed = os.uname_result((real.sysname, "backup.example.net", *real[2:]))
    monkeypatch.setattr(os, "uname", lambda: renamed)
    assert source.changed()


class Unrepairable:
    """A controller whose every site looks empty, and which must not be asked to change one."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.unreachable: dict[str, str] = {}
        self.locks: list[str] = []

    @contextmanager
    def locked(self, verb: str, wait: float) -> Iterator[None]:
        self.locks.append(verb)
        yield

    def observe_reachable(self) -> dict[str, Any]:
        assert self.locks, "observed before the pass held the locks"
        return {}

    def apply(self, *_: object) -> None:
        raise AssertionError("a pass on a profile that changed repaired")


def test_a_pass_whose_profile_changed_before_it_held_the_locks_repairs_nothing(profile_file: Path) -> None:
    controller = Unrepairable(ProfileFile(profile_file).profile)
    with pytest.raises(ProfileChanged):
        reconcile_once(cast(Controller, controller), {}, print, unchanged=lambda: False)
    assert controller.locks == ["reconcile"]


def test_the_points_daemon_ends_its_round_on_a_change_without_telling_systemd_it_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    address = str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(address)
        server.settimeout(0.1)
        monkeypatch.setenv("NOTIFY_SOCKET", address)
        run_points([], threading.Event(), print, changed=lambda: True)
        assert server.recv(64) == b"READY=1"
        with pytest.raises(TimeoutError):
            server.recv(64)  # no STOPPING=1: the same process goes on with the new profile
