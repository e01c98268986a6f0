"""Daemons run the profile as applied on their host (remirror.here.RunningProfile): one changed
and applied is never worked against with the text they started with, and one only edited is
left for `apply`."""

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
from remirror.daemons.cdp import Protected
from remirror.daemons.cdp import run as run_points
from remirror.here import SITE_VARIABLE, RunningProfile, applied_record, record_applied
from remirror.profile.layers import Cdp
from remirror.profile.model import Profile
from remirror.reconcile import ProfileChanged, reconcile_once
from remirror.reconcile import watch as watch_module
from remirror.reconcile.watch import Timing

SHIPPED = Path(__file__).parents[2] / "profiles" / "single-mirror.yaml"
ASYNC = "name: data\n    replication: {mode: async}"


@pytest.fixture
def profile_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(SITE_VARIABLE, "office")
    monkeypatch.setenv("REMIRROR_STATE_DIR", str(tmp_path / "state"))
    path = tmp_path / "office.yaml"
    path.write_text(SHIPPED.read_text())
    return path


def mode(profile: Profile) -> str:
    return profile.mirrors[0].replication.mode


def apply_text(path: Path, text: str) -> None:
    """What `apply` does with `text`: the file is it, and the record too."""
    path.write_text(text)
    record_applied(RunningProfile(path).profile, text, path)


def test_apply_keeps_the_text_after_the_yes_before_the_first_change_even_if_one_fails(
    profile_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from remirror.cli import main
    from remirror.controller import ApplyError
    from remirror.plan.actions import CHANGE, Action, Plan, Verb

    change = Action("office", Verb.SET_WRITE_BEHIND, "/dev/md/data", CHANGE)
    record, seen = applied_record("office"), list[object]()

    class Controller:
        def __init__(self, profile: Profile, **_: object) -> None:
            self.profile = profile

        def plan(self, _: object) -> Plan:
            return Plan((change,))

        def apply(self, *_: object) -> None:
            seen.append(record.exists())
            raise ApplyError("site office: SetWriteBehind /dev/md/data failed")

        def close(self) -> None:
            seen.append("closed")

    monkeypatch.setattr("remirror.controller.Controller", Controller)
    monkeypatch.setattr("remirror.controller.read_secrets", lambda *_, **__: {})
    with pytest.raises(SystemExit):
        main(["apply", str(profile_file)])  # nobody to say yes: nothing kept, nothing run
    assert not record.exists()
    assert seen == ["closed"]
    with pytest.raises(SystemExit) as done:
        main(["apply", "--yes", str(profile_file)])
    assert done.value.code == 1
    assert seen == ["closed", True, "closed"]  # kept before the change, under the locks
    assert record.read_text().splitlines()[0] == f"# applied from: {json.dumps(str(profile_file.resolve()))}"
    assert record.read_text().split("\n", 1)[1] == profile_file.read_text()
    capsys.readouterr()


def test_an_apply_of_another_file_naming_the_same_profile_is_not_taken(
    profile_file: Path, tmp_path: Path
) -> None:
    source, said = RunningProfile(profile_file), list[str]()
    other = tmp_path / "copy.yaml"
    other.write_text(profile_file.read_text().replace("name: data", ASYNC))
    record_applied(RunningProfile(other).profile, other.read_text(), other)
    assert source.follow(mode, "running", said.append) == "running"
    assert f"applied from {other}, not {profile_file}" in json.loads(said[0])["error"]


def test_an_edit_not_applied_is_left_for_apply(profile_file: Path) -> None:
    source, said = RunningProfile(profile_file), list[str]()
    profile_file.write_text(profile_file.read_text().replace("name: data", ASYNC))
    assert not source.changed()
    assert source.follow(mode, "as started", said.append) == "as started"
    assert mode(source.profile) == "sync"
    assert said == []


def test_what_apply_recorded_is_taken_once_and_said_in_the_journal(profile_file: Path) -> None:
    source, said = RunningProfile(profile_file), list[str]()
    apply_text(profile_file, profile_file.read_text().replace("name: data", ASYNC))
    assert source.changed()
    assert source.follow(mode, "as started", said.append) == "async"
    assert mode(source.profile) == "async"
    assert not source.changed()
    record = str(applied_record("office"))
    assert [json.loads(line) for line in said] == [{"event": "profile", "loaded": record}]
    assert applied_record("office").stat().st_mode & 0o777 == 0o600


def test_an_applied_text_the_daemon_cannot_take_keeps_it_as_it_ran_until_the_next_apply(
    profile_file: Path,
) -> None:
    source, said = RunningProfile(profile_file), list[str]()
    text = profile_file.read_text()

    def fails(_profile: Profile) -> str:
        raise OSError(28, "No space left on device")  # not remirror's own error: the daemon lives on

    apply_text(profile_file, text)
    assert source.follow(fails, "running", said.append) == "running"
    line = json.loads(said[0])
    assert line["event"] == "profile"
    assert "No space left on device" in line["error"]
    assert not source.changed()  # said once
    apply_text(profile_file, text)  # the same text applied again: taken this time
    assert source.changed()
    assert source.follow(mode, "running", said.append) == "sync"


class Unrepairable:
    """A controller whose every site looks empty, and which must not be asked to change one."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.unreachable: dict[str, str] = {}
        self.locks: list[str] = []
        self.closed = False

    @contextmanager
    def locked(self, verb: str, wait: float) -> Iterator[None]:
        self.locks.append(verb)
        yield

    def observe_reachable(self) -> dict[str, Any]:
        assert self.locks, "observed before the pass held the locks"
        return {}

    def apply(self, *_: object) -> None:
        raise AssertionError("a pass on a text an apply replaced repaired")

    def close(self) -> None:
        self.closed = True


def test_a_pass_that_an_apply_came_before_repairs_nothing(profile_file: Path) -> None:
    controller = Unrepairable(RunningProfile(profile_file).profile)
    with pytest.raises(ProfileChanged):
        reconcile_once(cast(Controller, controller), {}, print, unchanged=lambda: False)
    assert controller.locks == ["reconcile"]


def test_the_watch_runs_its_next_pass_on_what_an_apply_recorded_under_its_first(
    profile_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first pass finds, once it holds the locks, that an apply came first: it does
    nothing, the watch takes the applied text (its old controller closed), and the pass
    runs again on it."""
    source, stop, said = RunningProfile(profile_file), threading.Event(), list[str]()
    made: list[Unrepairable] = []
    passes: list[str] = []

    def running_of(profile: Profile) -> watch_module.Running:
        made.append(Unrepairable(profile))
        return watch_module.Running(cast(Controller, made[-1]), {})

    def one_pass(controller: Unrepairable, *_: object, unchanged: Any, **__: object) -> list[object]:
        if not passes:
            apply_text(profile_file, profile_file.read_text().replace("name: data", ASYNC))
        passes.append(mode(controller.profile))
        if not unchanged():
            raise ProfileChanged
        stop.set()
        return []

    monkeypatch.setattr(watch_module.Running, "of", staticmethod(running_of))
    monkeypatch.setattr(watch_module, "reconcile_once", one_pass)
    monkeypatch.setattr(watch_module, "_udev_events", lambda: None)
    watch_module.watch(source, Timing(interval=1, busy=1, debounce=0), stop, said.append)
    assert passes == ["sync", "async"]
    assert [c.closed for c in made] == [True, True]  # the first on the reload, the second at the end
    assert json.loads(said[0])["event"] == "profile"


def test_the_points_daemon_ends_its_round_on_an_apply_without_telling_systemd_it_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    address = str(tmp_path / "notify")
    settings = Cdp.model_validate({"every": "1m", "keep": "1d"})
    protected = Protected("data", str(tmp_path / "no-md"), settings, "office", "data")
    ticks: list[str] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(address)
        server.settimeout(0.1)
        monkeypatch.setenv("NOTIFY_SOCKET", address)
        run_points([protected], threading.Event(), ticks.append, changed=lambda: len(ticks) >= 2)
        assert server.recv(64) == b"READY=1"
        with pytest.raises(TimeoutError):
            server.recv(64)  # no STOPPING=1: the same process goes on with the new profile
    assert [json.loads(t)["event"] for t in ticks] == ["no_stack", "no_stack"]  # it ticked, then ended
