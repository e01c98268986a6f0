"""Mirror states from facts: recorded arrays from the lab, and simulated sites."""

from __future__ import annotations

import dataclasses

import pytest

from remirror.facts.model import IscsiSession
from remirror.facts.parsers import build_md_array
from remirror.facts.site import SiteFacts
from remirror.health import State, assess
from remirror.plan import make_plan
from remirror.profile import Profile, parse_profile
from tests.conftest import PROFILES as PROFILES_DIR
from tests.unit.simulated_sites import Sites
from tests.unit.test_facts_parsers import fixture, key_values
from tests.unit.test_plan_properties import PROFILES, SECRETS, bare_sites
from tests.unit.test_planner import site

SYNC = PROFILES["sync-none-1r-lan"]
WAIT = PROFILES["async-none-1r-lan"]  # async profiles say on_link_loss: wait
assert WAIT.mirrors[0].replication.on_link_loss == "wait"


def applied(profile: Profile) -> dict[str, SiteFacts]:
    sites = Sites(bare_sites())
    sites.run(make_plan(profile, sites.facts, SECRETS))
    return sites.facts


def with_members(
    facts: dict[str, SiteFacts], *states: set[str], sync_action: str = "idle"
) -> dict[str, SiteFacts]:
    """The primary's array with its members (in order: local, replicas) in these states."""
    (array,) = facts["a"].arrays
    members = tuple(
        dataclasses.replace(member, state=frozenset(state))
        for member, state in zip(array.members, states, strict=True)
    )
    changed = dataclasses.replace(array, members=members, sync_action=sync_action, sync_completed=(10, 100))
    return {**facts, "a": dataclasses.replace(facts["a"], arrays=(changed,))}


def with_session(facts: dict[str, SiteFacts], state: str) -> dict[str, SiteFacts]:
    sessions = tuple(dataclasses.replace(s, state=state) for s in facts["a"].sessions)
    return {**facts, "a": dataclasses.replace(facts["a"], sessions=sessions)}


def test_an_applied_mirror_is_mirrored() -> None:
    health = assess(SYNC, SYNC.mirrors[0], applied(SYNC))
    assert health.state is State.MIRRORED
    assert [(leg.role, leg.status, leg.write_mostly, leg.session) for leg in health.legs] == [
        ("primary", "in_sync", False, ""),
        ("replica", "in_sync", True, "LOGGED_IN"),
    ]


def test_a_failed_replica_leg_is_mirror_defunct() -> None:
    facts = with_session(with_members(applied(SYNC), {"in_sync"}, {"faulty", "write_mostly"}), "FAILED")
    health = assess(SYNC, SYNC.mirrors[0], facts)
    assert health.state is State.MIRROR_DEFUNCT
    assert health.reason == "replica leg on b is faulty (session FAILED)"


def test_a_failed_primary_leg_is_local_defunct_while_a_replica_serves() -> None:
    facts = with_members(applied(SYNC), {"faulty"}, {"in_sync", "write_mostly"})
    health = assess(SYNC, SYNC.mirrors[0], facts)
    assert health.state is State.LOCAL_DEFUNCT
    assert health.reason == "the primary leg /dev/a0 is faulty: a replica serves reads and writes"


def test_a_leg_being_recovered_is_syncing_with_progress() -> None:
    facts = with_members(applied(SYNC), {"in_sync"}, {"write_mostly"}, sync_action="recover")
    health = assess(SYNC, SYNC.mirrors[0], facts)
    assert (health.state, health.progress) == (State.SYNCING, (10, 100))
    assert health.legs[1].status == "syncing"


def test_a_lost_link_under_wait_is_degraded_waiting_not_defunct() -> None:
    # Under `wait` md keeps the leg (its I/O queues in the iSCSI layer).
    facts = with_session(applied(WAIT), "FAILED")
    health = assess(WAIT, WAIT.mirrors[0], facts)
    assert health.state is State.DEGRADED_WAITING
    assert health.reason == "session to b is FAILED: writes wait for the link"


def test_a_replica_leg_whose_session_is_gone_is_missing() -> None:
    facts = applied(SYNC)
    (array,) = facts["a"].arrays
    local = array.members[0]
    facts["a"] = dataclasses.replace(
        facts["a"], sessions=(), arrays=(dataclasses.replace(array, members=(local,)),)
    )
    health = assess(SYNC, SYNC.mirrors[0], facts)
    assert health.state is State.MIRROR_DEFUNCT
    assert health.reason == "replica leg on b is missing (no session)"


def test_a_stopped_array_is_defunct_and_one_never_built_is_absent() -> None:
    facts = applied(SYNC)
    stopped = {**facts, "a": dataclasses.replace(facts["a"], arrays=(), array_links={})}
    assert assess(SYNC, SYNC.mirrors[0], stopped).state is State.DEFUNCT
    assert assess(SYNC, SYNC.mirrors[0], bare_sites()).state is State.ABSENT


def test_an_unobservable_primary_is_unknown() -> None:
    health = assess(SYNC, SYNC.mirrors[0], {"a": None, "b": bare_sites()["b"]})
    assert (health.state, health.reason) == (State.UNKNOWN, "site a could not be observed")


@pytest.mark.parametrize(
    ("recorded", "session", "state"),
    [({}, "LOGGED_IN", State.MIRRORED), (key_values("sysfs-md-faulty.txt"), "FAILED", State.MIRROR_DEFUNCT)],
)
def test_the_arrays_recorded_in_the_lab(recorded: dict[str, str], session: str, state: State) -> None:
    """The lab's array `rec` (kernel 6.1, mdadm 4.2): healthy, then with the link cut during a write."""
    profile = parse_profile((PROFILES_DIR / "lab.yaml").read_text().replace("name: lab0", "name: rec"))
    mirror = profile.mirrors[0]
    array = build_md_array(
        "md127", {**key_values("sysfs-md.txt"), **recorded}, fixture("mdadm-detail-export.txt")
    )
    iqn = profile.replica_iqn(mirror, mirror.replicas[0])
    facts = {
        "site-a": site(
            "site-a", arrays=(array,), sessions=(IscsiSession(1, iqn, "192.0.2.2", 3260, session, "sda"),)
        ),
        "site-b": site("site-b"),
    }
    assert assess(profile, mirror, facts).state is state
