"""The reconciler's repairs: the next safe thing for each state, and nothing unsafe."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from remirror.facts.model import MdSuperblock
from remirror.facts.parsers import parse_examine
from remirror.facts.site import DiskFacts, SiteFacts
from remirror.health import State, assess
from remirror.plan import Plan, make_plan
from remirror.plan.actions import PlanError
from remirror.plan.repair import Repair, make_repair
from remirror.profile import Profile
from remirror.profile.names import by_path
from tests.unit.simulated_sites import Sites, at_site, wire
from tests.unit.test_plan_properties import PROFILES, SECRETS, bare_sites

PROFILE = PROFILES["sync-mutual-1r-lan"]
MIRROR = PROFILE.mirrors[0]
REPLICA = MIRROR.replicas[0]
BY_PATH = by_path(REPLICA.portal_address, PROFILE.replica_iqn(MIRROR, REPLICA))
FIXTURES = Path(__file__).parent / "fixtures" / "lab-6.1"


def applied(profile: Profile = PROFILE) -> Sites:
    sites = Sites(bare_sites())
    sites.run(make_plan(profile, sites.facts, SECRETS))
    return sites


def primary(facts: dict[str, SiteFacts], **changes: object) -> dict[str, SiteFacts]:
    return {**facts, "a": dataclasses.replace(facts["a"], **changes)}  # type: ignore[arg-type]


def replica_leg_failed(facts: dict[str, SiteFacts], session: str = "LOGGED_IN") -> dict[str, SiteFacts]:
    """md failed the replica leg (link lost); the session is now in state `session`."""
    (array,) = facts["a"].arrays
    members = tuple(
        dataclasses.replace(m, state=frozenset({"faulty", "write_mostly"}))
        if "write_mostly" in m.state
        else m
        for m in array.members
    )
    sessions = tuple(dataclasses.replace(s, state=session) for s in facts["a"].sessions)
    return with_replica_disk(
        primary(facts, arrays=(dataclasses.replace(array, members=members),), sessions=sessions)
    )


def with_replica_disk(
    facts: dict[str, SiteFacts], offline: str = "", events: int = 1
) -> dict[str, SiteFacts]:
    """The replica's disk as the primary sees it through its by-path link."""
    uuid_ = facts["a"].arrays[0].uuid if facts["a"].arrays else ""
    name = next((s.disk or "" for s in facts["a"].sessions if s.state == "LOGGED_IN"), "sdz")
    disk = DiskFacts(
        BY_PATH, True, name, 1 << 30, superblock=MdSuperblock(uuid_, "m0", "x", events), offline=offline
    )
    return primary(facts, disks={**facts["a"].disks, BY_PATH: disk})


def the_next_pass_re_adds_the_leg(sites: Sites) -> None:
    """Once the returning disk has been observed (its superblock read), a pass re-adds it."""
    sites.facts = with_replica_disk(sites.facts)
    result = repair(dict(sites.facts))
    assert [f"{a.site} {a.verb}" for a in result.actions] == ["a ReAddLeg"]
    sites.run(Plan(result.actions))
    assert assess(PROFILE, MIRROR, sites.facts).state is State.MIRRORED


def repair(facts: dict[str, SiteFacts | None], profile: Profile = PROFILE) -> Repair:
    mirror = profile.mirrors[0]
    return make_repair(profile, mirror, facts, SECRETS, assess(profile, mirror, facts))


def verbs(result: Repair) -> list[str]:
    return [f"{a.site} {a.verb}" for a in result.actions]


def test_a_mirrored_mirror_needs_nothing() -> None:
    assert repair(dict(applied().facts)) == Repair("m0", ())


def test_a_returning_leg_is_removed_and_re_added_with_its_bitmap() -> None:
    sites = applied()
    sites.facts = replica_leg_failed(sites.facts)
    result = repair(dict(sites.facts))
    assert verbs(result) == ["a ReAddLeg"]
    assert [s.get("argv") for s in at_site(result.actions[0])] == [
        ["mdadm", "/dev/md/m0", "--fail", "detached"],
        ["mdadm", "/dev/md/m0", "--remove", "detached"],
        ["mdadm", "/dev/md/m0", "--remove", "failed"],
        None,  # wait for the by-path link
        ["mdadm", "/dev/md/m0", "--re-add", BY_PATH],
        None,  # the leg joins the array's generation
    ]
    assert wire(result.actions[0])[-1] == {"kind": "leg_record_join", "source": "/dev/a0", "device": BY_PATH}
    # Never a full rebuild by itself: only the explanation of a refusal names --add.
    assert all("--add" not in s.get("argv", []) for s in at_site(result.actions[0]))
    sites.run(Plan(result.actions))
    assert assess(PROFILE, MIRROR, sites.facts).state is State.MIRRORED


@pytest.mark.parametrize("session", ["FAILED", "FREE"])
def test_while_iscsid_recovers_the_session_nothing_is_touched(session: str) -> None:
    facts = replica_leg_failed(applied().facts, session)
    result = repair(dict(facts))
    assert result.actions == ()
    assert result.blocked == f"the session to b is {session}: waiting for the link"


def test_an_offline_replica_disk_is_not_re_added() -> None:
    facts = with_replica_disk(replica_leg_failed(applied().facts), offline="transport-offline")
    result = repair(dict(facts))
    assert result.actions == ()
    assert result.blocked == f"{BY_PATH} is offline (transport-offline): waiting for it"


def test_after_a_dr_host_restart_its_lio_comes_back_then_the_session_then_the_leg() -> None:
    sites = applied()
    facts = replica_leg_failed(sites.facts)
    facts = primary(facts, sessions=())
    facts = {**facts, "b": dataclasses.replace(facts["b"], targets={}, backstores={})}
    sites.facts = facts
    result = repair(dict(facts))
    assert verbs(result) == [
        "b CreateBackstore",
        "b CreateTarget",
        "b CreatePortal",
        "b CreateLun",
        "b CreateNodeAcl",
        "b SaveLioConfig",
        "a LoginSession",
    ]
    # The leg comes back at the next pass, once its disk's superblock has been read.
    assert result.blocked == "the replica leg on b is re-added once its disk has been examined"
    sites.run(Plan(result.actions))
    the_next_pass_re_adds_the_leg(sites)


def test_after_a_dr_host_boot_udev_s_partial_array_on_its_disk_is_stopped_then_lio_comes_back() -> None:
    # Debian's initramfs (its mdadm.conf older than the `<ignore>` line) took the replica disk
    # into an inactive md127 at boot: it never ran, but LIO cannot open the disk while it holds it
    # (the hosts' lab, after the DR site's power cut).
    sites = applied()
    facts = primary(replica_leg_failed(sites.facts), sessions=())
    b = facts["b"]
    held = dataclasses.replace(b.disks["/dev/b0"], holders=("md127",))
    facts = {
        **facts,
        "b": dataclasses.replace(
            b,
            targets={},
            backstores={},
            disks={**b.disks, "/dev/b0": held},
            inactive_arrays={"md127": ("vdb",)},
        ),
    }
    result = repair(dict(facts))
    assert verbs(result)[:2] == ["b StopArray", "b CreateBackstore"], result
    assert at_site(result.actions[0])[0]["argv"] == ["mdadm", "--stop", "/dev/md127"]
    assert "a LoginSession" in verbs(result)
    # Held by anything else (a running array, dm): in use, and nothing is stopped.
    running = {**facts, "b": dataclasses.replace(facts["b"], inactive_arrays={})}
    with pytest.raises(PlanError, match="in use"):
        repair(dict(running))


def test_lost_write_mostly_and_write_behind_are_restored() -> None:
    facts = applied().facts
    (array,) = facts["a"].arrays
    members = tuple(dataclasses.replace(m, state=m.state - {"write_mostly"}) for m in array.members)
    facts = primary(facts, arrays=(dataclasses.replace(array, members=members, backlog=7),))
    assert verbs(repair(dict(facts))) == ["a SetWriteBehind", "a SetWriteMostly"]


def test_a_resync_left_pending_in_an_auto_read_only_array_is_resumed() -> None:
    facts = applied().facts
    (array,) = facts["a"].arrays
    facts = primary(facts, arrays=(dataclasses.replace(array, array_state="read-auto"),))
    result = repair(dict(facts))
    assert verbs(result) == ["a ResumeResync"]
    assert at_site(result.actions[0])[0]["argv"] == ["mdadm", "--readwrite", "/dev/md/m0"]


@pytest.mark.parametrize(
    ("break_it", "words"),
    [
        (lambda f: primary(f, arrays=(), array_links={}), "the array is not running"),
        (
            lambda f: primary(
                f,
                arrays=tuple(
                    dataclasses.replace(
                        a,
                        members=tuple(
                            # the primary's leg: the one member that is not write-mostly
                            dataclasses.replace(m, state=frozenset({"faulty"}))
                            if not m.is_write_mostly
                            else m
                            for m in a.members
                        ),
                    )
                    for a in f["a"].arrays
                ),
            ),
            "the primary leg is down",
        ),
    ],
)
def test_hands_off_when_a_person_must_decide(break_it: object, words: str) -> None:
    facts = break_it(applied().facts)  # type: ignore[operator]
    result = repair(dict(facts))
    assert result.actions == ()
    assert result.blocked.startswith(words)


def recorded_superblock(name: str, uuid_: str) -> MdSuperblock:
    """A superblock recorded in the lab (fixtures/lab-6.1, record-split-brain.sh), moved to this array."""
    examined = parse_examine((FIXTURES / f"mdadm-examine-{name}.txt").read_text())
    assert examined is not None
    return dataclasses.replace(examined, array_uuid=uuid_)


def after_a_split(replica: str) -> dict[str, SiteFacts]:
    """The replica leg failed; the superblocks of both legs as recorded after the split."""
    facts = replica_leg_failed(applied().facts)
    uuid_ = facts["a"].arrays[0].uuid
    local, remote = facts["a"].disks["/dev/a0"], facts["a"].disks[BY_PATH]
    disks = {
        "/dev/a0": dataclasses.replace(local, superblock=recorded_superblock("primary-reassembled", uuid_)),
        BY_PATH: dataclasses.replace(remote, superblock=recorded_superblock(replica, uuid_)),
    }
    return primary(facts, disks={**facts["a"].disks, **disks})


def test_a_leg_that_ran_on_its_own_is_split_brain_and_left_alone() -> None:
    # Recorded: it counts fewer events than the array (20 against 22), and md
    # would take it back with --re-add; its Array State gives it away.
    facts = after_a_split("replica-diverged")
    health = assess(PROFILE, MIRROR, facts)
    assert health.state is State.SPLIT_BRAIN
    assert health.reason.startswith(
        "the replica leg on b ran without the primary: its superblock records an array without the"
        " primary leg (Array State .A)"
    )
    result = repair(dict(facts))
    assert result.actions == ()
    assert result.blocked.startswith("split brain: remirror will not choose")


def test_a_leg_that_was_only_cut_off_is_re_added() -> None:
    facts = after_a_split("replica-stale")
    assert assess(PROFILE, MIRROR, facts).state is State.MIRROR_DEFUNCT
    assert verbs(repair(dict(facts))) == ["a ReAddLeg"]


def test_a_leg_counting_more_events_than_the_array_is_split_brain() -> None:
    facts = replica_leg_failed(applied().facts)
    local = facts["a"].disks["/dev/a0"]
    assert local.superblock is not None
    facts = primary(
        facts,
        disks={
            **facts["a"].disks,
            "/dev/a0": dataclasses.replace(
                local, superblock=dataclasses.replace(local.superblock, events=40)
            ),
        },
    )
    facts = with_replica_disk(facts, events=57)
    health = assess(PROFILE, MIRROR, facts)
    assert health.state is State.SPLIT_BRAIN
    assert "it counts 57 events, the array 40" in health.reason
    assert repair(dict(facts)).actions == ()


def test_a_leg_being_recovered_onto_is_syncing_even_if_read_an_event_ahead() -> None:
    # Superblocks are read one after the other while md updates them during
    # the recovery: the member's can count one event more than the primary's.
    facts = applied().facts
    (array,) = facts["a"].arrays
    members = tuple(
        dataclasses.replace(m, state=frozenset({"write_mostly"})) if "write_mostly" in m.state else m
        for m in array.members
    )
    recovering = dataclasses.replace(array, members=members, sync_action="recover", sync_completed=(10, 100))
    facts = primary(facts, arrays=(recovering,))
    local = facts["a"].disks["/dev/a0"]
    assert local.superblock is not None
    ahead = dataclasses.replace(local.superblock, events=41)
    facts = primary(
        facts, disks={**facts["a"].disks, "/dev/a0": dataclasses.replace(local, superblock=ahead)}
    )
    facts = with_replica_disk(facts, events=42)
    health = assess(PROFILE, MIRROR, facts)
    assert (health.state, health.legs[1].status) == (State.SYNCING, "syncing")
    assert repair(dict(facts)).actions == ()


def test_an_unreachable_replica_site_is_waited_for() -> None:
    facts: dict[str, SiteFacts | None] = {**replica_leg_failed(applied().facts), "b": None}
    result = repair(facts)
    assert result.actions == ()
    assert result.blocked == "site b could not be reached: waiting for it"


def test_the_reconciler_never_creates_assembles_or_rewrites_config() -> None:
    result = repair(dict(bare_sites()))
    assert result.actions == ()
    assert "never built" in result.blocked


def test_a_restarted_dr_host_with_the_session_still_failing_gets_a_fresh_login() -> None:
    # The target vanished with the DR host's LIO; iscsid may have stopped
    # retrying it. Once this pass re-creates it, the pass logs in afresh.
    sites = applied()
    facts = replica_leg_failed(sites.facts, "FAILED")
    sites.facts = {**facts, "b": dataclasses.replace(facts["b"], targets={}, backstores={})}
    result = repair(dict(sites.facts))
    assert verbs(result)[-2:] == ["b SaveLioConfig", "a LoginAfresh"]
    assert [s["argv"][-1] for s in at_site(result.actions[-1]) if s["kind"] == "run"] == [
        "--logout",
        "--login",
    ]
    sites.run(Plan(result.actions))
    the_next_pass_re_adds_the_leg(sites)


def test_a_returning_disk_without_the_array_superblock_is_not_rebuilt_by_itself() -> None:
    facts = replica_leg_failed(applied().facts)
    disk = facts["a"].disks[BY_PATH]
    facts = primary(facts, disks={**facts["a"].disks, BY_PATH: dataclasses.replace(disk, superblock=None)})
    result = repair(dict(facts))
    assert result.actions == ()
    assert result.blocked.startswith(f"{BY_PATH} carries no superblock of /dev/md/m0: only a full rebuild")
    assert f"mdadm /dev/md/m0 --add {BY_PATH}" in result.blocked


def test_a_session_down_before_md_noticed_is_mirror_defunct_and_recovered_without_a_re_add() -> None:
    # No write since the DR host lost its target: md still counts the leg in sync.
    sites = applied()
    facts = with_replica_disk(
        primary(
            sites.facts,
            sessions=tuple(dataclasses.replace(s, state="FAILED") for s in sites.facts["a"].sessions),
        )
    )
    sites.facts = {**facts, "b": dataclasses.replace(facts["b"], targets={}, backstores={})}
    health = assess(PROFILE, MIRROR, sites.facts)
    assert (health.state, health.reason) == (
        State.MIRROR_DEFUNCT,
        "session to b is FAILED: md fails the leg at its next write",
    )
    result = repair(dict(sites.facts))
    assert verbs(result)[-2:] == ["b SaveLioConfig", "a LoginAfresh"]
    sites.run(Plan(result.actions))
    # The new session's disk has a new name; md still holds the old one: the
    # next pass takes it out and re-adds the disk.
    after = assess(PROFILE, MIRROR, sites.facts)
    assert (after.state, after.legs[1].status) == (State.MIRROR_DEFUNCT, "faulty")
    the_next_pass_re_adds_the_leg(sites)
