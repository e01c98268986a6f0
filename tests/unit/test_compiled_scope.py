"""A site's compiled scope (remirror.facts.scope, remirror.agent.compiled_scope): the scope an
agent reads back is the one its profiles give, it is read only while nothing it was built from
changed, only from a file no one but root may write, and reading it loads no profile model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

from remirror.agent import compiled_scope, policy
from remirror.agent.policy import Refused
from remirror.facts.scope import SiteScope, scope_from_text, scope_to_text
from remirror.profile import Profile, load_profile, parse_profile
from tests.unit.test_plan_properties import PROFILES, profile_text
from tests.unit.test_points import PROFILE as OWN_POINTS
from tests.unit.test_policy import LAB, ONE_FOR_BOTH, scope_of

ROOT = Path(__file__).resolve().parents[2]
# Every shape a scope takes: the property tests' profiles (modes, CHAP forms, two replicas,
# exports), a WireGuard mirror's (tunnels), the DR site's own points, a seeded mirror's, the
# shipped ones and the contract's (CDP retention by a grid).
WIREGUARD = profile_text("sync", "mutual", 2, False, "wan").replace(
    "    replication:", "    transport: wireguard\n    replication:", 1
)
SEEDED = (
    (ROOT / "profiles" / "lab.yaml")
    .read_text()
    .replace("      disk: /dev/lab/a0\n", "      disk: /dev/lab/a0\n      keep_data: true\n")
    .replace("      on_link_loss: degrade\n", "      on_link_loss: degrade\n      initial_sync: seeded\n")
)
SHAPES: dict[str, Profile] = {
    **PROFILES,
    "wireguard": parse_profile(WIREGUARD),
    "own points": parse_profile(OWN_POINTS),
    "seeded": parse_profile(SEEDED),
    **{path.name: load_profile(path) for path in sorted((ROOT / "profiles").glob("*.yaml"))},
    "contract": load_profile(ROOT.parent / "shared" / "contract" / "two-site.yaml"),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_every_sites_scope_reads_back_as_itself(name: str) -> None:
    profile = SHAPES[name]
    for site in profile.sites:
        scope = scope_of(profile, site)
        text = scope_to_text(scope)
        assert scope_from_text(text) == scope
        assert scope_to_text(scope_from_text(text)) == text  # one scope, one text


def test_the_shapes_fill_every_field_of_a_scope() -> None:
    # A field every shape leaves empty would read back whatever its codec did.
    scopes = [scope_of(profile, site) for profile in SHAPES.values() for site in profile.sites]
    assert [f.name for f in fields(SiteScope) if not any(getattr(scope, f.name) for scope in scopes)] == []
    assert any(t.initiators for scope in scopes for t in scope.targets.values())
    assert any(t.secret_files for scope in scopes for t in scope.targets.values())


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d["scope"].pop("disks"),  # a field missing
        lambda d: d["scope"].update(extra=[]),  # a field unknown
        lambda d: d["scope"].update(disks="/dev/sda"),  # a string where a set belongs
        lambda d: d["scope"].update(portals=[["10.0.0.1", "3260"]]),  # a port that is text
        lambda d: d["scope"].update(portals=[["10.0.0.1", 3260, 1]]),  # three where two belong
        lambda d: d["scope"].update(portals=[["10.0.0.1", True]]),  # a truth where a port belongs
        lambda d: d.update(format=0),  # another format
    ],
)
def test_a_compiled_scope_that_is_not_exactly_one_is_refused(damage: object) -> None:
    document = json.loads(scope_to_text(scope_of(PROFILES[sorted(PROFILES)[0]], "b")))
    assert callable(damage)
    damage(document)
    with pytest.raises(ValueError, match=r"."):
        scope_from_text(json.dumps(document))


@pytest.fixture
def site(tmp_path: Path) -> tuple[Path, Path]:
    """A site B's profile directory (the one profile for both sites, its site file) and its cache."""
    profiles = tmp_path / "etc"
    profiles.mkdir()
    (profiles / "lab.yaml").write_text(ONE_FOR_BOTH)
    (profiles / "site").write_text("b\n")
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    return profiles, run / "scope.json"


def test_the_scope_is_compiled_once_and_read_back_while_nothing_changed(site: tuple[Path, Path]) -> None:
    profiles, cache = site
    built = policy.load_scope(profiles, cache)
    assert built is not None
    assert built.sites == frozenset({"b"})
    assert cache.stat().st_mode & 0o777 == 0o600
    key, _, text = cache.read_text().partition("\n")
    assert scope_from_text(text) == built
    # Read back, not built: a scope filed under the same key is what the agent takes.
    altered = scope_to_text(scope_from_text(text)).replace('"/dev/b0"', '"/dev/b9"')
    cache.write_text(f"{key}\n{altered}")
    cache.chmod(0o600)
    read = policy.load_scope(profiles, cache)
    assert read is not None
    assert "/dev/b9" in read.disks


@pytest.mark.parametrize(
    "change",
    [
        lambda p: (p / "lab.yaml").write_text(ONE_FOR_BOTH.replace("/dev/b0", "/dev/b1")),  # the text
        lambda p: (p / "site").write_text("a\n"),  # the site it is
        lambda p: (p / "other.yaml").write_text(LAB.replace("name: lab", "name: other")),  # a profile more
    ],
)
def test_a_change_to_what_the_scope_is_built_from_builds_it_again(
    site: tuple[Path, Path], change: object
) -> None:
    profiles, cache = site
    before = policy.load_scope(profiles, cache)
    key = cache.read_text().partition("\n")[0]
    assert callable(change)
    change(profiles)
    after = policy.load_scope(profiles, cache)
    assert after != before
    assert cache.read_text().partition("\n")[0] != key
    assert policy.load_scope(profiles, cache) == after


def test_the_same_text_in_a_new_file_within_one_clock_tick_is_the_same_key(site: tuple[Path, Path]) -> None:
    # The key is the text, not the file's times: a copy over it changes nothing it holds.
    profiles, _ = site
    files = policy.profile_files(profiles)
    key = compiled_scope.scope_key(compiled_scope.read_texts(files), profiles / "site")
    (profiles / "lab.yaml").unlink()
    (profiles / "lab.yaml").write_text(ONE_FOR_BOTH)
    assert compiled_scope.scope_key(compiled_scope.read_texts(files), profiles / "site") == key


@pytest.mark.parametrize("loose", ["file", "directory"])
def test_a_compiled_scope_others_may_write_is_never_read(site: tuple[Path, Path], loose: str) -> None:
    profiles, cache = site
    policy.load_scope(profiles, cache)
    key, _, text = cache.read_text().partition("\n")
    cache.write_text(f"{key}\n{text.replace('/dev/b0', '/dev/b9')}")
    (cache if loose == "file" else cache.parent).chmod(0o666 if loose == "file" else 0o777)
    scope = policy.load_scope(profiles, cache)
    assert scope is not None
    assert "/dev/b9" not in scope.disks
    assert "/dev/b0" in scope.disks


def test_a_damaged_compiled_scope_is_built_again(site: tuple[Path, Path]) -> None:
    profiles, cache = site
    built = policy.load_scope(profiles, cache)
    key = cache.read_text().partition("\n")[0]
    cache.write_text(f"{key}\n{{not json")
    assert policy.load_scope(profiles, cache) == built
    assert scope_from_text(cache.read_text().partition("\n")[2]) == built


def test_a_profile_that_does_not_load_is_refused_every_time_and_never_compiled(
    site: tuple[Path, Path],
) -> None:
    profiles, cache = site
    (profiles / "broken.yaml").write_text("version: 1\nname: [\n")
    for _ in range(2):
        with pytest.raises(Refused, match=r"broken\.yaml does not load"):
            policy.load_scope(profiles, cache)
    assert not cache.exists()


def test_only_the_sites_own_profile_directory_is_compiled_by_default(tmp_path: Path) -> None:
    (tmp_path / "lab.yaml").write_text(ONE_FOR_BOTH)
    (tmp_path / "site").write_text("b\n")
    policy.load_scope(tmp_path)
    assert not list(tmp_path.glob("*.json"))  # a test's profiles never reach /run/remirror either


def test_an_agent_that_reads_its_compiled_scope_loads_no_profile_model(site: tuple[Path, Path]) -> None:
    # What every remote command's agent pays at a site holding profiles (issue 48): with its
    # scope compiled, neither pydantic nor ruamel, as sshd starts it (SSH_CONNECTION set).
    profiles, cache = site
    probe = (
        "import sys\n"
        "from pathlib import Path\n"
        "from remirror.agent import policy\n"
        f"scope = policy.load_scope(Path({str(profiles)!r}), Path({str(cache)!r}))\n"
        "assert scope is not None and scope.sites == frozenset({'b'})\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    environment = {"SSH_CONNECTION": "10.0.0.1 50000 10.0.0.2 22", "PATH": "/usr/bin:/bin"}
    first, second = (
        subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=environment
        )
        for _ in range(2)
    )
    assert "pydantic" in first.stdout.split()  # built from the profiles
    modules = {name.split(".")[0] for name in second.stdout.split()}
    assert not modules & {"pydantic", "ruamel", "click", "rich"}
    assert "remirror.profile" not in second.stdout.split()


def test_a_site_file_changed_while_the_scope_is_built_files_nothing(
    site: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The key is taken before the profiles are read: the operator's `echo a > site` between
    # the two would file site A's scope under site B's key, served when the file says b again.
    import remirror.here

    profiles, cache = site
    real = remirror.here.this_host

    def rewritten_meanwhile(**kwargs: object) -> object:
        (profiles / "site").write_text("a\n")
        return real(**kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(remirror.here, "this_host", rewritten_meanwhile)
    scope = policy.load_scope(profiles, cache)
    assert scope is not None
    assert scope.sites == frozenset({"a"})
    assert not cache.exists()


def test_code_changed_since_the_agent_loaded_it_files_nothing(
    site: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # An upgrade under a running agent: the files say the new code, the process runs the old.
    import remirror

    profiles, cache = site
    monkeypatch.setattr(remirror, "LOADED_NS", 0)
    assert policy.load_scope(profiles, cache) is not None
    assert not cache.exists()


def test_remirrors_run_directories_are_roots_to_write_whatever_the_umask(tmp_path: Path) -> None:
    # /run/remirror and a drill's mounts: anyone may pass through (a database the drill's
    # hooks start as its own user reaches its data there), only root may write; the
    # after-hooks owed: root's alone.
    from remirror.files import make_dirs

    old = os.umask(0o002)
    try:
        make_dirs(tmp_path / "run" / "remirror" / "hooks", 0o700)
        make_dirs(tmp_path / "run" / "remirror" / "drill" / "m0", 0o755)
    finally:
        os.umask(old)
    modes = {
        directory: (tmp_path / directory).stat().st_mode & 0o777
        for directory in (
            "run",
            "run/remirror",
            "run/remirror/hooks",
            "run/remirror/drill",
            "run/remirror/drill/m0",
        )
    }
    assert modes == {
        "run": 0o755,
        "run/remirror": 0o755,
        "run/remirror/hooks": 0o700,
        "run/remirror/drill": 0o755,
        "run/remirror/drill/m0": 0o755,
    }
