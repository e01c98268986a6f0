"""Failover's pure parts (docs/failover.md): leg records, roles from generations, the promotion's plan."""

from __future__ import annotations

import dataclasses
import struct

import pytest

from remirror.facts.generations import (
    MAX_GENERATIONS,
    RECORD_SLOT,
    Generation,
    LegRecord,
    MiB,
    decode_record,
    encode_record,
    first_record,
    record_offset,
    record_slot_for,
)
from remirror.facts.model import IscsiSession
from remirror.facts.parsers import ParseError, parse_bitmap_dirty, parse_bitmap_location
from remirror.facts.site import SiteFacts, site_facts
from remirror.health import State, assess
from remirror.plan import make_plan
from remirror.plan.actions import PlanError
from remirror.plan.promote import make_promotion
from remirror.plan.resolve import make_resolution
from remirror.profile import Profile
from remirror.profile.loader import parse_profile
from remirror.profile.names import array_uuid, by_path, replica_path
from remirror.roles import as_run, leg_records, md_size, profile_as_run, roles, running_primaries
from tests.unit.simulated_sites import Sites, at_site, conf_text, wire
from tests.unit.test_plan_properties import SECRETS, bare_sites, profile_text

PROFILE_TEXT = profile_text("sync", "mutual", 1, False, "lan").replace(
    "primary: {site: a, disk: /dev/a0}", "primary: {site: a, disk: /dev/a0, portal: 192.0.2.1:3260}"
)
PROFILE = parse_profile(PROFILE_TEXT)
MIRROR = PROFILE.mirrors[0]
UUID = array_uuid(PROFILE, MIRROR)


def record(*sites: str) -> LegRecord:
    generations = tuple(
        Generation(n, s, float(n), "create" if n == 1 else "planned") for n, s in enumerate(sites, 1)
    )
    return LegRecord("m0", UUID, generations)


def two_slots(*records: LegRecord) -> bytes:
    data = bytearray(2 * RECORD_SLOT)
    for r in records:
        at = record_slot_for(r) * RECORD_SLOT
        data[at : at + RECORD_SLOT] = encode_record(r)
    return bytes(data)


def applied(profile: Profile = PROFILE) -> Sites:
    sites = Sites(bare_sites())
    sites.run(make_plan(profile, sites.facts, SECRETS))
    return sites


# --- records -----------------------------------------------------------------------------


def test_a_record_reads_back_as_written_and_the_newer_slot_wins() -> None:
    first = dataclasses.replace(record("a"), sequence=1)
    second = dataclasses.replace(first.then("b", 5.0, "forced"), sequence=2)
    assert decode_record(two_slots(first)) == first
    assert decode_record(two_slots(first, second)) == second
    assert second.current == Generation(2, "b", 5.0, "forced")


def test_a_torn_write_leaves_the_older_slot() -> None:
    first = dataclasses.replace(record("a"), sequence=1)
    second = dataclasses.replace(first.then("b", 5.0, "forced"), sequence=2)
    data = bytearray(two_slots(first, second))
    data[RECORD_SLOT + 100] ^= 0xFF  # slot 1 (sequence 2) damaged mid-payload
    assert decode_record(bytes(data)) == first
    assert decode_record(bytes(2 * RECORD_SLOT)) is None


def test_the_history_is_bounded() -> None:
    r = record("a")
    for n in range(3 * MAX_GENERATIONS):
        r = r.then("b" if n % 2 else "a", float(n), "planned")
    assert len(r.generations) == MAX_GENERATIONS
    assert r.current.n == 3 * MAX_GENERATIONS + 1
    assert len(encode_record(r)) == RECORD_SLOT


def test_the_record_lies_in_the_last_mib_and_md_stops_short_of_it() -> None:
    assert record_offset(256 * MiB) == 255 * MiB
    assert record_offset(256 * MiB + 4096) == 255 * MiB  # a partial MiB at the end is not used
    # The lab's 256 MiB disks: mdadm put data at 1 MiB (fixtures/lab-6.1); md ends well before 255.
    assert md_size([256 * MiB, 300 * MiB]) == 252 * MiB
    # A 2 TB disk: mdadm's data offset grows to 128 MiB at most; the size leaves room for it.
    two_tb = 2 * 10**12
    assert two_tb - md_size([two_tb]) >= 128 * MiB + MiB + MiB
    assert two_tb - md_size([two_tb]) < 140 * MiB


def test_create_array_stops_short_and_writes_generation_one_on_every_leg() -> None:
    plan = make_plan(PROFILE, bare_sites(), SECRETS)
    create = next(a for a in plan.actions if a.verb == "CreateArray")
    assert "--size=1020M" in at_site(create)[0]["argv"]  # legs of 1 GiB
    step = wire(create)[-1]
    replica = MIRROR.replicas[0]
    assert step == {
        "kind": "leg_record_create",
        "mirror": "m0",
        "array": UUID,
        "site": "a",
        "devices": ["/dev/a0", by_path(replica.portal_address, PROFILE.replica_iqn(MIRROR, replica))],
    }


# --- roles -------------------------------------------------------------------------------


def test_the_newest_generation_names_the_primary() -> None:
    assert roles(MIRROR, {"a": record("a"), "b": record("a")}).primary == "a"
    now = roles(MIRROR, {"a": record("a"), "b": record("a", "b")})
    assert now.primary == "b"
    assert now.behind() == ["a"]
    assert roles(MIRROR, {"a": None, "b": None}).primary == "a"  # no records: the profile's


def test_two_legs_claiming_one_generation_is_a_conflict() -> None:
    now = roles(MIRROR, {"a": record("a", "a"), "b": record("a", "b")})
    assert "disagree on generation 2" in now.conflict


def test_a_record_counts_only_beside_the_arrays_superblock() -> None:
    sites = applied()
    assert leg_records(MIRROR, UUID, sites.facts)["b"] == first_record("m0", UUID, "a", 0.0)
    wiped = dataclasses.replace(sites.facts["b"].disks["/dev/b0"], superblock=None, signatures=())
    facts = {**sites.facts, "b": dataclasses.replace(sites.facts["b"], disks={"/dev/b0": wiped})}
    assert leg_records(MIRROR, UUID, facts)["b"] is None


def test_as_run_swaps_the_legs() -> None:
    running = as_run(MIRROR, "b")
    assert running.primary.site == "b"
    assert running.primary.disk == "/dev/b0"
    assert [(r.site, r.disk, r.portal) for r in running.replicas] == [("a", "/dev/a0", "192.0.2.1:3260")]
    assert as_run(running, "a").primary.site == "a"
    assert as_run(MIRROR, "a") is MIRROR
    # Without a portal the home primary cannot serve as a replica: it is left out.
    plain = parse_profile(profile_text("sync", "none", 1, False, "lan")).mirrors[0]
    assert as_run(plain, "b").replicas == []


# --- promotion ---------------------------------------------------------------------------


def verbs(plan: object) -> list[str]:
    return [f"{a.site} {a.verb}" for a in plan.actions]  # type: ignore[attr-defined]


def test_a_planned_promotion_stands_the_old_primary_down_and_records_on_every_leg() -> None:
    sites = applied()
    plan = make_promotion(PROFILE, "m0", "b", sites.facts, SECRETS, force=False)
    assert verbs(plan) == [
        # First: site a's boot and udev must no longer assemble the array it hands over.
        "a WriteMdadmConf",
        "a StopArray",
        "a RecordGeneration",
        "a LogoutSession",
        "a DeleteIscsiNode",
        "b DeleteTarget",
        "b DeleteBackstore",
        "b SaveLioConfig",
        "b WriteMdadmConf",
    ]  # `apply` with the new roles then assembles the array on b from both legs
    assert "ARRAY <ignore>" in conf_text(plan.actions[0])
    step = wire(next(a for a in plan.actions if a.verb == "RecordGeneration"))[0]
    assert step["devices"][0] == "/dev/a0"
    assert step["devices"][1].startswith("/dev/disk/by-path/")
    assert (step["site"], step["after"], step["how"]) == ("b", 1, "planned")


def test_a_promotion_writes_each_sites_conf_for_the_other_mirrors_as_they_run_now() -> None:
    # m0 runs at b (promoted earlier); promoting m1 to b must not write an ARRAY line that would
    # assemble m0 at a's boot (a's leg of m0 is a replica now: a DR site refuses such a line).
    two = parse_profile(
        PROFILE_TEXT + "  - name: m1\n    primary: {site: a, disk: /dev/a-fast, portal: 192.0.2.1:3261}\n"
        "    replicas: [{site: b, disk: /dev/b-fast, portal: 192.0.2.2:3261}]\n    iscsi: {chap: none}\n"
    )
    sites = applied(two)
    sites.run(make_promotion(two, "m0", "b", sites.facts, SECRETS, force=False))
    sites.run(make_plan(profile_as_run(two, running_primaries(two, sites.facts)), sites.facts, SECRETS))
    assert running_primaries(two, sites.facts) == {"m0": "b", "m1": "a"}
    plan = make_promotion(two, "m1", "b", sites.facts, SECRETS, force=False)
    confs = {a.site: conf_text(a) for a in plan.actions if a.verb == "WriteMdadmConf"}
    assert "ARRAY /dev/md/m0" not in confs["a"], confs["a"]
    assert "ARRAY /dev/md/m0" in confs["b"], confs["b"]


def test_a_planned_promotion_needs_the_mirror_in_sync_and_the_primary_reached() -> None:
    sites = applied()
    (array,) = sites.facts["a"].arrays
    degraded = dataclasses.replace(
        array, members=tuple(m for m in array.members if "write_mostly" not in m.state), degraded=1
    )
    facts = {**sites.facts, "a": dataclasses.replace(sites.facts["a"], arrays=(degraded,))}
    with pytest.raises(PlanError, match="needs every leg in sync"):
        make_promotion(PROFILE, "m0", "b", facts, SECRETS, force=False)
    with pytest.raises(PlanError, match="cannot be reached: `--force`"):
        make_promotion(PROFILE, "m0", "b", {**sites.facts, "a": None}, SECRETS, force=False)


def test_a_forced_promotion_fences_first_and_records_on_its_own_leg_only() -> None:
    sites = applied()
    plan = make_promotion(PROFILE, "m0", "b", {**sites.facts, "a": None}, SECRETS, force=True)
    assert verbs(plan)[:5] == [
        "b FenceTarget",
        "b DeleteBackstore",
        "b SaveLioConfig",
        "b RecordGeneration",
        "b AssembleArray",
    ]
    step = wire(plan.actions[3])[0]
    assert (step["devices"], step["site"], step["how"]) == (["/dev/b0"], "b", "forced")
    assert wire(plan.actions[4])[0]["devices"] == ["/dev/b0"]  # the array from site B's leg alone
    # ARRAY line for the new primary; the unreached site's file waits for it.
    assert "b WriteMdadmConf" in verbs(plan)
    assert not any(a.site == "a" for a in plan.actions)


def test_promotion_refusals() -> None:
    sites = applied()
    with pytest.raises(PlanError, match="already runs on a"):
        make_promotion(PROFILE, "m0", "a", sites.facts, SECRETS, force=True)
    with pytest.raises(PlanError, match="has no leg on site c"):
        make_promotion(PROFILE, "m0", "c", sites.facts, SECRETS, force=True)
    with pytest.raises(PlanError, match="site b cannot be reached"):
        make_promotion(PROFILE, "m0", "b", {**sites.facts, "b": None}, SECRETS, force=True)
    plain = parse_profile(profile_text("sync", "mutual", 1, False, "lan"))
    with pytest.raises(PlanError, match="has no `portal`"):
        make_promotion(plain, "m0", "b", applied(plain).facts, SECRETS, force=True)
    blank = bare_sites()
    with pytest.raises(PlanError, match="holds no leg record"):
        make_promotion(PROFILE, "m0", "b", blank, SECRETS, force=True)


def test_after_a_promotion_apply_builds_the_mirror_the_other_way_round() -> None:
    sites = applied()
    sites.run(make_promotion(PROFILE, "m0", "b", sites.facts, SECRETS, force=False))
    running = profile_as_run(PROFILE, {"m0": roles(MIRROR, leg_records(MIRROR, UUID, sites.facts)).primary})
    assert running.mirrors[0].primary.site == "b"
    plan = make_plan(running, sites.facts, SECRETS)
    assert "a CreateTarget" in verbs(plan)
    assert "b LoginSession" in verbs(plan)
    assemble = next(a for a in plan.actions if a.verb == "AssembleArray")
    assert assemble.site == "b"
    assert wire(assemble)[0]["devices"] == [
        "/dev/b0",
        replica_path(PROFILE, as_run(MIRROR, "b"), as_run(MIRROR, "b").replicas[0]),
    ]
    assert not any(a.verb == "CreateArray" for a in plan.actions)


def test_an_array_udev_assembled_in_part_is_stopped_before_the_leg_is_used() -> None:
    # After the hand-over udev's incremental assembly took site a's leg into an inactive md127
    # (the leg record's write made a change event): it never ran, and it holds the leg.
    sites = applied()
    sites.run(make_promotion(PROFILE, "m0", "b", sites.facts, SECRETS, force=False))
    a = sites.facts["a"]
    held = dataclasses.replace(a.disks["/dev/a0"], holders=("md127",))
    facts = {
        **sites.facts,
        "a": dataclasses.replace(a, disks={**a.disks, "/dev/a0": held}, inactive_arrays={"md127": ("sda",)}),
    }
    running = profile_as_run(PROFILE, {"m0": "b"})
    plan = make_plan(running, facts, SECRETS)
    stop = plan.actions.index(next(a for a in plan.actions if a.verb == "StopArray"))
    export = plan.actions.index(next(a for a in plan.actions if a.verb == "CreateBackstore"))
    assert at_site(plan.actions[stop])[0]["argv"] == ["mdadm", "--stop", "/dev/md127"]
    assert stop < export
    # Held by something else (a running array, dm): in use, refused as before.
    other = {**facts, "a": dataclasses.replace(facts["a"], inactive_arrays={})}
    with pytest.raises(PlanError, match="in use"):
        make_plan(running, other, SECRETS)


# --- health ------------------------------------------------------------------------------


def test_a_former_primary_that_ran_without_the_new_one_is_split_brain_from_its_own_view() -> None:
    sites = applied()
    facts = dict(sites.facts)
    # Site B runs the mirror from its leg alone (a forced promotion); site A's leg, not exported,
    # says on site A that it ran without site B (md failed B there and A wrote on).
    running = as_run(MIRROR, "b")
    b_leg = facts["b"].disks["/dev/b0"]
    assert b_leg.superblock is not None
    a_leg = facts["a"].disks["/dev/a0"]
    assert a_leg.superblock is not None
    b_sb = dataclasses.replace(b_leg.superblock, slot=1, array_state=".A", events=10)
    a_sb = dataclasses.replace(a_leg.superblock, slot=0, array_state="A.", events=12)
    (array,) = facts["a"].arrays
    b_array = dataclasses.replace(
        array, members=(array.members[0].__class__("dm-1", 1, frozenset({"in_sync"})),)
    )
    facts["b"] = dataclasses.replace(
        facts["b"],
        arrays=(b_array,),
        disks={
            **facts["b"].disks,
            "/dev/b0": dataclasses.replace(b_leg, superblock=b_sb, kernel_name="dm-1"),
        },
    )
    facts["a"] = dataclasses.replace(
        facts["a"],
        arrays=(),
        sessions=(),
        disks={**facts["a"].disks, "/dev/a0": dataclasses.replace(a_leg, superblock=a_sb)},
    )
    running_profile = profile_as_run(PROFILE, {"m0": "b"})
    health = assess(running_profile, running, facts)
    assert health.state is State.SPLIT_BRAIN, health
    assert "site a" in health.reason or "on a" in health.reason


def test_sessions_of_another_initiator_are_not_this_sites() -> None:
    raw = {
        "initiator": "InitiatorName=iqn.2026-11.test:a\n",
        "sessions": [
            {
                "sid": 1,
                "sysfs": {"state": "LOGGED_IN", "targetname": "t1", "initiatorname": "iqn.2026-11.test:a"},
            },
            {
                "sid": 2,
                "sysfs": {"state": "LOGGED_IN", "targetname": "t2", "initiatorname": "iqn.2026-11.test:b"},
            },
            {"sid": 3, "sysfs": {"state": "LOGGED_IN", "targetname": "t3"}},  # older kernels: no name
        ],
    }
    facts: SiteFacts = site_facts("a", raw)
    assert [s.target for s in facts.sessions] == ["t1", "t3"]
    assert isinstance(facts.sessions[0], IscsiSession)


def test_legs_claiming_one_generation_for_two_sites_are_split_brain() -> None:
    sites = applied()
    facts = dict(sites.facts)
    for site, disk, who in (("a", "/dev/a0", "a"), ("b", "/dev/b0", "b")):
        leg = facts[site].disks[disk]
        claimed = first_record("m0", UUID, "a", 0.0).then(who, 1.0, "forced")
        facts[site] = dataclasses.replace(
            facts[site], disks={**facts[site].disks, disk: dataclasses.replace(leg, leg_record=claimed)}
        )
    health = assess(PROFILE, MIRROR, facts)
    assert health.state is State.SPLIT_BRAIN
    assert "disagree on generation 2" in health.reason


# --- resolve -----------------------------------------------------------------------------


def bitmap(dirty: list[int], chunks: int = 20, chunk: int = MiB) -> bytes:
    """An on-disk md bitmap (md-bitmap.h's bitmap_super_t, then the bits) with `dirty` chunks set."""
    header = struct.pack(
        "<II16sQQQIIII", 0x6D746962, 4, b"\0" * 16, 9, 7, chunks * chunk // 512, 0, chunk, 5, 0
    )
    bits = bytearray(-(-chunks // 8))
    for i in dirty:
        bits[i // 8] |= 1 << (i % 8)
    return header.ljust(256, b"\0") + bytes(bits)


def test_the_dirty_chunks_of_a_bitmap_are_merged_byte_ranges() -> None:
    assert parse_bitmap_dirty(bitmap([])) == []
    assert parse_bitmap_dirty(bitmap([0, 1, 2, 9, 19])) == [(0, 3 * MiB), (9 * MiB, MiB), (19 * MiB, MiB)]
    # The last chunk may be short: the array's size is not a multiple of the chunk.
    short = bytearray(bitmap([3], chunks=4))
    struct.pack_into("<Q", short, 40, (3 * MiB + 4096) // 512)
    assert parse_bitmap_dirty(bytes(short)) == [(3 * MiB, 4096)]
    with pytest.raises(ParseError):
        parse_bitmap_dirty(b"\0" * 300)
    examine = "    Super Offset : 8 sectors\nInternal Bitmap : 8 sectors from superblock\n"
    assert parse_bitmap_location(examine) == (4096, 4096)


def split(sites: Sites) -> dict[str, SiteFacts | None]:
    """Site B ran the mirror alone after a forced promotion and wrote; site A's leg says it ran
    without B too (both wrote): the lab's split brain, as the facts show it."""
    sites.run(make_promotion(PROFILE, "m0", "b", {**sites.facts, "a": None}, SECRETS, force=True))
    facts = dict(sites.facts)
    a_leg = facts["a"].disks["/dev/a0"]
    assert a_leg.superblock is not None
    a_sb = dataclasses.replace(a_leg.superblock, slot=0, array_state="A.", events=50)
    facts["a"] = dataclasses.replace(
        facts["a"],
        arrays=(),
        sessions=(),
        disks={**facts["a"].disks, "/dev/a0": dataclasses.replace(a_leg, superblock=a_sb)},
    )
    b_leg = facts["b"].disks["/dev/b0"]
    assert b_leg.superblock is not None
    b_sb = dataclasses.replace(b_leg.superblock, slot=1, array_state=".A", events=40)
    facts["b"] = dataclasses.replace(
        facts["b"], disks={**facts["b"].disks, "/dev/b0": dataclasses.replace(b_leg, superblock=b_sb)}
    )
    return dict(facts)


def test_resolving_for_the_running_primary_forgets_the_other_leg() -> None:
    facts = split(applied())
    plan = make_resolution(PROFILE, "m0", "b", facts, "/var/tmp/kept")
    order = verbs(plan)
    assert order.index("a SaveRanges") + 1 == order.index("a ForgetArray")
    forget = plan.actions[order.index("a ForgetArray")]
    assert at_site(forget)[0]["argv"] == ["mdadm", "--zero-superblock", "/dev/a0"]
    assert forget.destructive
    assert not any(a.verb in ("RecordGeneration", "AssembleArray") for a in plan.actions)  # b runs it


def test_resolving_for_the_other_side_makes_it_primary_by_a_new_generation() -> None:
    facts = split(applied())
    plan = make_resolution(PROFILE, "m0", "a", facts, None)
    assert "b StopArray" in verbs(plan)  # site B ran the array: it stops first
    assert verbs(plan).index("b StopArray") < verbs(plan).index("b ForgetArray")
    record = next(a for a in plan.actions if a.verb == "RecordGeneration")
    assert record.site == "a"
    assert wire(record)[0]["n"] == 3  # after generation 2 (b's forced promotion)
    assert any(a.site == "a" and a.verb == "AssembleArray" for a in plan.actions)
    assert any(a.site == "b" and a.verb == "ForgetArray" for a in plan.actions)


def test_resolve_refuses_without_a_split_brain_or_a_site() -> None:
    sites = applied()
    with pytest.raises(PlanError, match="not in split brain"):
        make_resolution(PROFILE, "m0", "a", sites.facts, None)
    with pytest.raises(PlanError, match="cannot be reached"):
        make_resolution(PROFILE, "m0", "a", {**sites.facts, "b": None}, None)


def test_a_new_mirrors_record_outranks_what_an_earlier_mirror_left_on_the_disk(tmp_path: object) -> None:
    # Found in the lab: a mirror destroyed after a forced promotion, its disks wiped (wipefs
    # clears md's superblock, not the last MiB) and the profile applied again (the same array
    # UUID): the old record, with the higher sequence, named site b primary of the new array.
    from pathlib import Path

    from remirror.agent.generations import create_step, read_record, write_record
    from remirror.protocol.steps import LegRecordCreate

    disk = Path(str(tmp_path)) / "leg"
    disk.write_bytes(bytes(8 * MiB))
    old = record("a", "b")
    for sequence in (5, 6):  # both slots hold a version of the old mirror's record (6 and 7)
        write_record(str(disk), dataclasses.replace(old, sequence=sequence))
    create_step(LegRecordCreate("m0", UUID, "a", (str(disk),)))
    found = read_record(str(disk))
    assert found is not None
    assert (found.current.n, found.current.site, found.current.how) == (1, "a", "create")


def test_a_device_with_no_room_for_a_record_holds_none(tmp_path: object) -> None:
    # Observe reads every disk's last MiB: on an empty device that place is before its start.
    from pathlib import Path

    from remirror.agent.generations import read_record

    for size in (0, MiB - 4096):
        disk = Path(str(tmp_path)) / f"leg-{size}"
        disk.write_bytes(bytes(size))
        assert read_record(str(disk)) is None


def test_after_a_promotion_of_an_async_mirror_the_new_primarys_leg_moves_last() -> None:
    # The promoted site's leg was a replica's, in the array's first slot; assembled on that site
    # it would be the first leg md writes to, and md would send nothing behind (plan/md.py).
    profile = parse_profile(
        profile_text("async", "mutual", 1, False, "lan").replace(
            "primary: {site: a, disk: /dev/a0}", "primary: {site: a, disk: /dev/a0, portal: 192.0.2.1:3260}"
        )
    )
    mirror = profile.mirrors[0]
    sites = applied(profile)
    sites.run(make_promotion(profile, "m0", "b", sites.facts, SECRETS, force=False))
    running = profile_as_run(profile, {"m0": "b"})
    # `promote` applies the new roles twice (failover.py): the first pass assembles the array on
    # site b, the second moves site b's leg last, now that the array runs with every leg in sync.
    sites.run(make_plan(running, sites.facts, SECRETS))
    second = make_plan(running, sites.facts, SECRETS)
    assert verbs(second) == ["b ReorderLegs"]
    sites.run(second)
    assert make_plan(running, sites.facts, SECRETS).is_empty
    (array,) = sites.facts["b"].arrays
    local = sites.facts["b"].disks["/dev/b0"].kernel_name
    member = array.member(local)
    assert member is not None
    assert member.slot == max(m.slot or 0 for m in array.members)
    assert roles(mirror, leg_records(mirror, array_uuid(profile, mirror), sites.facts)).primary == "b"


def test_a_former_primary_running_under_another_name_is_stood_down_by_that_name() -> None:
    # Site a was cut off while b was promoted by force; a clean reboot then started a's array
    # as md127 with /dev/md/m0_0 only (docs/safety.md, "Boot"): stopping /dev/md/m0 would stop
    # nothing, and a's leg could never be exported to b.
    sites = applied()
    sites.run(make_promotion(PROFILE, "m0", "b", {**sites.facts, "a": None}, SECRETS, force=True))
    (array,) = sites.facts["a"].arrays
    running = profile_as_run(PROFILE, {"m0": "b"})
    for links, stopped in (
        ((MIRROR.name,), "/dev/md/m0"),
        ((f"{MIRROR.name}_0",), f"/dev/{array.kernel_name}"),
    ):
        facts = {
            **sites.facts,
            "a": dataclasses.replace(sites.facts["a"], array_links={array.kernel_name: links}),
        }
        plan = make_plan(running, facts, SECRETS)
        (stop,) = [a for a in plan.actions if a.verb == "StopArray"]
        assert (stop.site, at_site(stop)[0]["argv"]) == ("a", ["mdadm", "--stop", stopped])
        assert plan.actions.index(stop) < plan.actions.index(
            next(a for a in plan.actions if a.verb == "CreateBackstore")
        )


def test_a_forced_promotion_is_refused_while_the_old_primary_is_reached_and_runs_the_array() -> None:
    # Forced with site a answering and running the mirror (its start at boot won a race with
    # the promotion, or it never went): two primaries would write, each on its own leg.
    sites = applied()
    with pytest.raises(PlanError, match="would make two primaries"):
        make_promotion(PROFILE, "m0", "b", sites.facts, SECRETS, force=True)
    stopped = {**sites.facts, "a": dataclasses.replace(sites.facts["a"], arrays=())}
    assert "b FenceTarget" in verbs(make_promotion(PROFILE, "m0", "b", stopped, SECRETS, force=True))
    # Nor does a retry that finishes a forced promotion cut short (its generation written, its
    # assembly not) while site a came back running the array.
    sites.run(make_promotion(PROFILE, "m0", "b", {**sites.facts, "a": None}, SECRETS, force=True))
    unfinished = {**sites.facts, "b": dataclasses.replace(sites.facts["b"], arrays=())}
    assert sites.facts["a"].arrays  # a never heard of it
    with pytest.raises(PlanError, match=r"site a is reached and runs m0 as /dev/md\d+: .* `mdadm --stop"):
        make_promotion(PROFILE, "m0", "b", unfinished, SECRETS, force=True)
    finished = make_promotion(PROFILE, "m0", "b", {**unfinished, "a": None}, SECRETS, force=True)
    assert "b AssembleArray" in verbs(finished)  # with a out of reach: finished, a fenced
