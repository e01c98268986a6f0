"""A write a leg did not take (docs/safety.md): what md shows of it, how remirror reports it,
repairs it, and leaves out a disk that keeps failing. Recorded outputs: fixtures/lab-6.1
(record-bad-blocks.sh, kernel 6.1.0-56, mdadm 4.2)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from remirror.agent.md_legs import dirty_chunks
from remirror.facts.cdp import ThinPoolStatus, parse_thin_pool_status, stack_names
from remirror.facts.model import MdMember, MdSuperblock
from remirror.facts.parsers import (
    build_md_array,
    parse_bad_blocks,
    parse_examine,
    parse_examine_badblocks,
)
from remirror.facts.site import DiskFacts, DmDevice, SiteFacts
from remirror.health import State, assess
from remirror.health.check import DEFAULT_CRITICAL, DEFAULT_WARNING, Status, judge
from remirror.health.metrics import render
from remirror.health.report import report
from remirror.health.seen import HELD_RETRY, READD_TRIES, Seen
from remirror.plan import make_plan
from remirror.plan.repair import make_repair
from remirror.profile import parse_profile
from remirror.profile.names import array_uuid, by_path, points_key, replica_path
from remirror.protocol.steps import DropBadBlockLog
from tests.unit.simulated_sites import wire
from tests.unit.test_facts_parsers import fixture
from tests.unit.test_planner import IQN, MIRROR, PROFILE, REPLICA, SECRETS, converged, with_array

NOW = 1_800_000_000.0
MiB = 1024 * 1024
REPLICA_PATH = by_path(REPLICA.portal_address, IQN)
SECTORS = ((133120, 512), (133632, 512), (134144, 512), (134656, 512))  # 1 MiB, 64 MiB into the data


def sysfs_fixture() -> dict[str, str]:
    """`fixtures/lab-6.1/sysfs-md-bad-blocks.txt`: `== dev-NAME/FILE` headers, then the file."""
    files: dict[str, str] = {}
    name = ""
    for line in fixture("sysfs-md-bad-blocks.txt").splitlines(keepends=True):
        if line.startswith("== "):
            name = line[3:].strip()
            files[name] = ""
        else:
            files[name] += line
    return files


# --- what md shows (recorded in the lab) ----------------------------------------------------------


def test_a_write_md_absorbed_shows_in_the_members_bad_block_log_while_it_stays_in_sync() -> None:
    files = sysfs_fixture()
    member_files = {path: text for path, text in files.items() if path.startswith("dev-")}
    detail = fixture("mdadm-detail-export.txt")
    array = build_md_array("md127", {"level": "raid1\n", "array_state": "clean\n", **member_files}, detail)
    (member,) = array.members
    assert member.is_in_sync  # md still counts it in sync, as mdstat's [UU] said
    assert "write_error" in member.state
    assert member.bad_blocks == SECTORS
    assert member.data_offset == 2048
    # The array's bytes it lacks: 1 MiB, 64 MiB into the mirror.
    assert member.missed() == ((64 * MiB, MiB),)
    assert member.missed_bytes == MiB


def test_the_superblock_says_whether_a_leg_has_a_log_and_what_it_lists() -> None:
    with_log = parse_examine(fixture("mdadm-examine-bad-block-log.txt"))
    without = parse_examine(fixture("mdadm-examine-no-bad-block-log.txt"))
    assert with_log is not None
    assert without is not None
    assert with_log.bad_block_log
    assert not without.bad_block_log
    assert parse_examine_badblocks(fixture("mdadm-examine-badblocks.txt")) == SECTORS
    assert parse_examine_badblocks(fixture("mdadm-examine-badblocks-no-log.txt")) == ()


def test_sysfs_lists_are_read_whole_and_once_and_a_cut_one_still_counts() -> None:
    assert parse_bad_blocks("133120 512\n133632 512\n\n133120 512\n") == ((133120, 512), (133632, 512))
    assert parse_bad_blocks("") == ()
    # A log longer than sysfs's page ends mid-line: what precedes it still says the leg lacks writes.
    assert parse_bad_blocks("133120 512\n1336") == ((133120, 512),)


def test_the_chunks_marked_are_those_that_hold_the_listed_sectors() -> None:
    # md's entries count from the device's start; the bitmap's chunks from the array's data.
    assert dirty_chunks(list(SECTORS), 2048, MiB) == [(64, 64)] * 4
    # A range across a chunk's end marks both; one in md's own metadata marks none.
    assert dirty_chunks([(2048 + 2047, 2)], 2048, MiB) == [(0, 1)]
    assert dirty_chunks([(8, 8)], 2048, MiB) == []
    # Metadata 1.0 (keep_data): the data starts at byte 0.
    assert dirty_chunks([(0, 1)], 0, 64 * MiB) == [(0, 0)]


# --- how remirror reports it ----------------------------------------------------------------------


def lacking(
    facts: dict[str, SiteFacts], device: str, sectors: tuple[tuple[int, int], ...]
) -> dict[str, SiteFacts]:
    """The primary's array with `device`'s member listing `sectors` in its bad block log."""
    (array,) = facts["site-a"].arrays
    members = tuple(
        dataclasses.replace(m, bad_blocks=sectors, data_offset=2048) if m.device == device else m
        for m in array.members
    )
    return with_array(facts, members=members)


def test_a_replica_that_lacks_acknowledged_writes_is_not_in_sync_and_its_rpo_runs() -> None:
    facts = lacking(converged(), "sda", SECTORS)
    health = assess(PROFILE, MIRROR, facts)
    assert health.state is State.MIRROR_DEFUNCT
    assert health.reason == (
        "replica leg on site-b lacks 1MiB at 64MiB of acknowledged writes (its disk failed them; md's"
        " bad block log): `remirror reconcile` rewrites them"
    )
    assert health.legs[1].status == "incomplete"
    seen = Seen({MIRROR.name: {"site-b": NOW - 42}})
    (found,) = report(PROFILE, facts, seen, NOW)
    replica = found.legs[1]
    assert replica.missed == ((64 * MiB, MiB),)
    assert replica.out_of_sync_bytes == MiB  # the bitmap forgot them: md cleared their chunk
    assert replica.rpo_seconds == 42
    # Not dated in sync while it lacks them.
    assert seen.updated([health], NOW) == seen
    verdict = judge([found], DEFAULT_WARNING, DEFAULT_CRITICAL)
    assert verdict.status is Status.CRITICAL
    assert "lacks 1MiB at 64MiB of acknowledged writes" in verdict.text
    samples = metrics_of([found])
    assert samples[("remirror_leg_bad_blocks_bytes", "site-b")] == MiB
    assert samples[("remirror_leg_in_sync", "site-b")] == 0


def test_the_primarys_own_leg_lacking_writes_is_critical_though_the_mirror_serves() -> None:
    facts = lacking(converged(), "dm-0", ((2048 + 163840, 2048),))
    health = assess(PROFILE, MIRROR, facts)
    assert health.state is State.MIRRORED  # the replicas hold every write: nothing to repair there
    assert "the primary leg lacks 1MiB at 80MiB" in health.reason
    assert "the only good copy" in health.reason
    (found,) = report(PROFILE, facts, Seen({}), NOW)
    assert found.legs[0].status == "incomplete"
    assert found.legs[0].out_of_sync_bytes == MiB
    verdict = judge([found], DEFAULT_WARNING, DEFAULT_CRITICAL)
    assert verdict.status is Status.CRITICAL
    assert "the primary leg lacks 1MiB at 80MiB" in verdict.text
    assert metrics_of([found])[("remirror_leg_bad_blocks_bytes", "site-a")] == MiB


def metrics_of(reports: list[Any]) -> dict[tuple[str, str], float]:
    text = render(reports, NOW, "lab", "0")
    return {
        (sample.name, sample.labels.get("leg", "")): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


# --- how it is repaired ---------------------------------------------------------------------------


def with_replica_superblock(facts: dict[str, SiteFacts], log: bool) -> dict[str, SiteFacts]:
    """The replica's iSCSI disk on the primary, its superblock with or without a bad block log."""
    superblock = MdSuperblock(
        converged()["site-a"].arrays[0].uuid,
        "lab0",
        "0:0:0:0",
        10,
        slot=0,
        array_state="AA",
        bad_block_log=log,
    )
    disk = DiskFacts(REPLICA_PATH, True, "sda", 256 * MiB, (), superblock)
    a = facts["site-a"]
    return {**facts, "site-a": dataclasses.replace(a, disks={**a.disks, REPLICA_PATH: disk})}


def test_a_replica_leg_in_sync_with_a_log_loses_it_by_a_repair() -> None:
    plan = make_plan(PROFILE, with_replica_superblock(converged(), log=True), SECRETS)
    (drop,) = [a for a in plan.actions if a.verb == "DropBadBlockLog"]
    assert drop.site == "site-a"
    assert drop.repair
    assert not drop.destructive
    assert drop.steps == (DropBadBlockLog("/dev/md/lab0", REPLICA_PATH),)
    assert wire(drop) == [{"kind": "drop_bad_block_log", "md": "/dev/md/lab0", "device": REPLICA_PATH}]
    assert "bad block log off" in drop.subject
    # Without a log, nothing to do; with sectors in it, they are rewritten by the same re-add.
    assert make_plan(PROFILE, with_replica_superblock(converged(), log=False), SECRETS).is_empty
    holes = lacking(with_replica_superblock(converged(), log=True), "sda", SECTORS)
    (drop,) = [a for a in make_plan(PROFILE, holes, SECRETS).actions if a.verb == "DropBadBlockLog"]
    assert "1MiB of writes site-b failed (its bad block log) rewritten" in drop.subject
    # The reconciler makes it: a hole is filled without waiting for an operator.
    health = assess(PROFILE, MIRROR, holes)
    repair = make_repair(PROFILE, MIRROR, holes, SECRETS, health)
    assert [a.verb for a in repair.actions] == ["DropBadBlockLog"]


def test_nothing_is_planned_for_a_leg_out_of_the_array_or_while_md_resyncs() -> None:
    logged = with_replica_superblock(converged(), log=True)
    busy = with_array(logged, sync_action="recover")
    assert not [a for a in make_plan(PROFILE, busy, SECRETS).actions if a.verb == "DropBadBlockLog"]
    members = (
        MdMember("dm-0", 1, frozenset({"in_sync"})),
        MdMember("sda", 0, frozenset({"faulty", "write_mostly"})),
    )
    out = with_array(logged, members=members)
    assert not [a for a in make_plan(PROFILE, out, SECRETS).actions if a.verb == "DropBadBlockLog"]


def test_the_local_leg_moves_only_once_no_log_is_dropped() -> None:
    local_first = (
        MdMember("dm-0", 0, frozenset({"in_sync"})),
        MdMember("sda", 1, frozenset({"in_sync", "write_mostly"})),
    )
    logged = with_array(with_replica_superblock(converged(), log=True), members=local_first)
    verbs = [a.verb for a in make_plan(PROFILE, logged, SECRETS).actions]
    assert "DropBadBlockLog" in verbs
    assert "ReorderLegs" not in verbs  # the leg is out for a moment: the move waits for the next plan
    clean = with_array(with_replica_superblock(converged(), log=False), members=local_first)
    assert [a.verb for a in make_plan(PROFILE, clean, SECRETS).actions] == ["ReorderLegs"]


def failed(facts: dict[str, SiteFacts]) -> dict[str, SiteFacts]:
    """The replica leg failed by md, its session up (a disk that failed a write, not the link)."""
    members = (
        MdMember("dm-0", 1, frozenset({"in_sync"})),
        MdMember("sda", 0, frozenset({"faulty", "write_mostly", "write_error"})),
    )
    return with_array(with_replica_superblock(facts, log=False), members=members)


def test_a_leg_is_left_out_after_three_re_adds_and_put_back_by_retry() -> None:
    facts = failed(converged())
    health = assess(PROFILE, MIRROR, facts)
    assert [a.verb for a in make_repair(PROFILE, MIRROR, facts, SECRETS, health).actions] == ["ReAddLeg"]
    readd = make_repair(PROFILE, MIRROR, facts, SECRETS, health).actions[0]
    assert readd.target == IQN  # whose leg: the reconciler counts its re-adds
    seen = Seen({})
    for n in range(READD_TRIES):
        assert seen.held_until(MIRROR.name, "site-b") is None
        seen = seen.readded(MIRROR.name, "site-b", NOW + n)
        seen = seen.updated([health], NOW + n)  # still faulty: the count stays
    assert seen.failed_readds(MIRROR.name, "site-b") == READD_TRIES
    assert seen.held_until(MIRROR.name, "site-b") == NOW + READD_TRIES - 1 + HELD_RETRY
    held = {"site-b": "the replica leg on site-b failed again after 3 re-adds: left out"}
    repair = make_repair(PROFILE, MIRROR, facts, SECRETS, health, held)
    assert repair.actions == ()
    assert "left out" in repair.blocked
    # status says so, and check, and Prometheus.
    (found,) = report(PROFILE, facts, seen, NOW + 10)
    assert found.legs[1].failed_readds == READD_TRIES
    assert found.legs[1].held_until == NOW + READD_TRIES - 1 + HELD_RETRY
    verdict = judge([found], DEFAULT_WARNING, DEFAULT_CRITICAL)
    assert "the leg on site-b is left out after 3 failed re-adds" in verdict.text
    assert metrics_of([found])[("remirror_leg_held", "site-b")] == 1
    # Back in sync (after `reconcile --retry`, or the hourly try): forgotten.
    healthy = assess(PROFILE, MIRROR, converged())
    assert seen.updated([healthy], NOW + 20).readds == {}


def test_the_reconcilers_memory_survives_it(tmp_path: Any) -> None:
    from remirror.monitor import load_seen, record_in_sync

    health = assess(PROFILE, MIRROR, failed(converged()))
    record_in_sync(PROFILE, [health], [(MIRROR.name, "site-b")])
    record_in_sync(PROFILE, [health], [(MIRROR.name, "site-b")])
    assert load_seen(PROFILE).failed_readds(MIRROR.name, "site-b") == 2
    record_in_sync(PROFILE, [assess(PROFILE, MIRROR, converged())])
    assert load_seen(PROFILE).failed_readds(MIRROR.name, "site-b") == 0


POINTS = parse_profile(
    """\
version: 1
name: pts
sites:
  a: {host: local}
  b: {host: "ssh://root@b"}
mirrors:
  - name: m
    primary: {site: a, disk: /dev/a0}
    replicas:
      - {site: b, disk: /dev/b0, portal: "192.0.2.2:3260", points: {every: 1h, keep: 7d}}
    replication: {mode: sync}
    iscsi: {chap: none}
""",
    "pts.yaml",
)


def with_pool(facts: dict[str, SiteFacts], pool: ThinPoolStatus) -> dict[str, SiteFacts]:
    mirror = POINTS.mirrors[0]
    name = stack_names(points_key(mirror, "b"))["pool"]
    b = facts["b"]
    return {**facts, "b": dataclasses.replace(b, dm={**b.dm, name: DmDevice(name, "dm-9", None, None, pool)})}


def test_a_leg_whose_points_pool_is_full_waits_for_room() -> None:
    from tests.unit.test_health_state import applied, with_members

    mirror = POINTS.mirrors[0]
    facts = with_members(applied(POINTS), {"in_sync"}, {"faulty", "write_mostly"})
    # Its iSCSI disk is back on the primary, with the array's superblock: a re-add if room.
    path = replica_path(POINTS, mirror, mirror.replicas[0])
    superblock = MdSuperblock(array_uuid(POINTS, mirror), "m", "0:0:0:0", 1, slot=0, array_state="AA")
    a = facts["a"]
    disks = {**a.disks, path: DiskFacts(path, True, "sdb", 256 * MiB, (), superblock)}
    facts = {**facts, "a": dataclasses.replace(a, disks=disks)}
    full = with_pool(facts, ThinPoolStatus(3, 100, 1000, 4096, 4096, "out_of_data_space"))
    health = assess(POINTS, mirror, full)
    repair = make_repair(POINTS, mirror, full, {}, health)
    assert repair.actions == ()
    assert "fill their pool (out_of_data_space)" in repair.blocked
    assert "remirror cdp prune PROFILE m --leg" in repair.blocked
    room = with_pool(facts, ThinPoolStatus(4, 100, 1000, 3000, 4096, "rw"))
    assert [a.verb for a in make_repair(POINTS, mirror, room, {}, health).actions] == ["ReAddLeg"]


def test_points_filling_their_pool_are_critical_before_a_write_fails() -> None:
    from tests.unit.test_health_state import applied

    mirror = POINTS.mirrors[0]
    assert mirror.replicas[0].points is not None
    assert mirror.replicas[0].points.pool_critical == 90
    recorded = parse_thin_pool_status(fixture("dmsetup-status-thin-pool-points.txt"))
    filling = with_pool(applied(POINTS), dataclasses.replace(recorded, data_used=3700, data_total=4096))
    (found,) = report(POINTS, filling, Seen({}), NOW)
    assert found.state is State.MIRRORED
    assert found.legs[1].points is not None
    assert found.legs[1].points.pool_filling
    verdict = judge([found], DEFAULT_WARNING, DEFAULT_CRITICAL)
    assert verdict.status is Status.CRITICAL
    assert "fill 90% of their pool (critical at 90%)" in verdict.text
    assert "remirror cdp prune PROFILE m --leg --keep DURATION --yes" in verdict.text
    below = with_pool(applied(POINTS), dataclasses.replace(recorded, data_used=3000, data_total=4096))
    assert (
        judge(report(POINTS, below, Seen({}), NOW), DEFAULT_WARNING, DEFAULT_CRITICAL).status
        is not Status.CRITICAL
    )
    # The DR site that cannot reach the primary still says it.
    alone = {"a": None, "b": filling["b"]}
    verdict = judge(report(POINTS, alone, Seen({}), NOW), DEFAULT_WARNING, DEFAULT_CRITICAL)
    assert "site unreachable" in verdict.text
    assert "fill 90% of their pool" in verdict.text


def test_prune_deletes_only_what_is_older_and_never_the_newest(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from remirror.agent import cdp as local
    from remirror.agent import cdp_requests
    from remirror.facts.cdp import RecoveryPoint, layout
    from remirror.facts.cdp_index import CdpIndex

    dropped: list[int] = []
    monkeypatch.setattr(
        local, "delete_points", lambda name, md, index, doomed: dropped.extend(p.id for p in doomed)
    )
    now = time.time()
    points = (RecoveryPoint(1, now - 7200, 1), RecoveryPoint(2, now - 600, 2), RecoveryPoint(3, now - 60, 3))
    index = CdpIndex("m.b", layout(2 << 21, 64 * 1024, 25), points, 4)
    request = {"mirror": "m.b", "md": "/dev/b0", "older_than": 3600.0}
    # Without --yes: said, nothing deleted.
    assert [p["id"] for p in cdp_requests._prune(request, index)["pruned"]] == [1]
    assert dropped == []
    # Everything but the newest, when asked for all: the newest point always stays.
    done = cdp_requests._prune({**request, "older_than": 0.0, "yes": True}, index)
    assert [p["id"] for p in done["pruned"]] == [1, 2]
    assert done["deleted"]
    assert dropped == [1, 2]


def test_no_log_is_dropped_and_no_leg_put_back_while_the_primarys_leg_lacks_writes() -> None:
    # The replica may hold the only good copy of the sectors the primary's disk failed: out even
    # for a second, they could not be read; recovered from the primary, they would be lost.
    logged = lacking(with_replica_superblock(converged(), log=True), "dm-0", ((2048, 8),))
    assert not [a for a in make_plan(PROFILE, logged, SECRETS).actions if a.verb == "DropBadBlockLog"]
    out = lacking(failed(converged()), "dm-0", ((2048, 8),))
    health = assess(PROFILE, MIRROR, out)
    repair = make_repair(PROFILE, MIRROR, out, SECRETS, health)
    assert "ReAddLeg" not in [a.verb for a in repair.actions]
    assert "the primary leg lacks 4KiB at 0B (its disk failed writes)" in repair.blocked


def test_a_log_is_dropped_only_while_every_other_leg_is_whole_and_the_link_up() -> None:
    logged = with_replica_superblock(converged(), log=True)
    degraded = with_array(logged, degraded=1)
    assert not [a for a in make_plan(PROFILE, degraded, SECRETS).actions if a.verb == "DropBadBlockLog"]
    auto = with_array(logged, array_state="read-auto")
    assert not [a for a in make_plan(PROFILE, auto, SECRETS).actions if a.verb == "DropBadBlockLog"]
    sessions = tuple(dataclasses.replace(s, state="FAILED") for s in logged["site-a"].sessions)
    down = {**logged, "site-a": dataclasses.replace(logged["site-a"], sessions=sessions)}
    assert not [a for a in make_plan(PROFILE, down, SECRETS).actions if a.verb == "DropBadBlockLog"]


def test_a_link_that_fails_is_not_counted_as_a_disk_that_fails() -> None:
    facts = failed(converged())
    seen = Seen({}).readded(MIRROR.name, "site-b", NOW).readded(MIRROR.name, "site-b", NOW + 1)
    health = assess(PROFILE, MIRROR, facts)
    assert seen.updated([health], NOW + 2).failed_readds(MIRROR.name, "site-b") == 2
    sessions = tuple(dataclasses.replace(s, state="FAILED") for s in facts["site-a"].sessions)
    cut = assess(
        PROFILE, MIRROR, {**facts, "site-a": dataclasses.replace(facts["site-a"], sessions=sessions)}
    )
    assert seen.updated([cut], NOW + 2).failed_readds(MIRROR.name, "site-b") == 0


def test_the_reconciler_counts_only_the_re_adds_that_ran() -> None:
    from remirror.plan.actions import CHANGE, Action, Verb
    from remirror.reconcile import _readded

    readd = Action("site-a", Verb.RE_ADD_LEG, "x", CHANGE, (), repair=True, target=IQN)
    drop = dataclasses.replace(readd, verb=Verb.DROP_BAD_BLOCK_LOG)
    other = dataclasses.replace(readd, verb=Verb.SET_WRITE_MOSTLY)
    assert _readded(PROFILE, MIRROR, (other, readd)) == ["site-b"]
    assert _readded(PROFILE, MIRROR, (drop,)) == ["site-b"]
    assert _readded(PROFILE, MIRROR, (other,)) == []


def test_a_primary_gone_leaves_an_incomplete_replica_serving_and_says_what_it_lacks() -> None:
    members = (
        MdMember("dm-0", 1, frozenset({"faulty"})),
        MdMember("sda", 0, frozenset({"in_sync", "write_mostly"}), bad_blocks=SECTORS, data_offset=2048),
    )
    health = assess(PROFILE, MIRROR, with_array(converged(), members=members))
    assert health.state is State.LOCAL_DEFUNCT
    assert "the replica leg on site-b lacks 1MiB at 64MiB" in health.reason


def test_an_array_md_marked_broken_is_defunct() -> None:
    health = assess(PROFILE, MIRROR, with_array(converged(), array_state="broken"))
    assert health.state is State.DEFUNCT
    assert "takes no writes" in health.reason


def test_resyncs_an_add_left_held_are_critical_and_let_go_by_a_repair() -> None:
    held = with_array(converged(), syncs_held=True)
    (release,) = make_plan(PROFILE, held, SECRETS).actions
    assert release.verb == "ReleaseResyncs"
    assert release.repair
    assert wire(release) == [
        {"kind": "md_attribute", "md": "/dev/md127", "attribute": "sync_max", "value": "max"}
    ]
    (found,) = report(PROFILE, held, Seen({}), NOW)
    verdict = judge([found], DEFAULT_WARNING, DEFAULT_CRITICAL)
    assert verdict.status is Status.CRITICAL
    assert "md holds every resync" in verdict.text
    # md's `sync_max` reads `max` when it holds nothing, a sector when it holds.
    sysfs = {"level": "raid1\n", "array_state": "clean\n", "sync_max": "0\n"}
    assert build_md_array("md127", sysfs, fixture("mdadm-detail-export.txt")).syncs_held
    sysfs["sync_max"] = "max\n"
    assert not build_md_array("md127", sysfs, fixture("mdadm-detail-export.txt")).syncs_held


def test_every_dm_device_is_read_with_two_commands_and_cut_per_device() -> None:
    # One `dmsetup table` and one `dmsetup status` for all of a site's devices (the agent's
    # observation; a CDP stack is six devices), each part as `dmsetup table NAME` prints it.
    from remirror.facts.dm import parse_cache_status, parse_dm_table, split_dm_listing

    tables = split_dm_listing(fixture("dmsetup-table-all.txt"))
    statuses = split_dm_listing(fixture("dmsetup-status-all.txt"))
    assert set(tables) == set(statuses)
    assert "remirror-rec-a1-cache" in tables
    cache = parse_dm_table(tables["remirror-rec-a1-cache"])
    assert (cache.target, cache.block_size) == ("writecache", 4096)
    assert parse_cache_status(statuses["remirror-rec-a1-cache"]).blocks == 16320
    assert parse_dm_table(tables["remirror-rec-b1-linear"]).devices == ("252:5",)
    assert tables["remirror-rec-two"] == "0 2048 linear 252:6 0\n2048 2048 error \n"  # both targets
    assert split_dm_listing("No devices found\n") == {}
