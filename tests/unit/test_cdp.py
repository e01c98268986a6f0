"""CDP: the profile's settings, the layout on the mirror, the index of points, when points are
taken and pruned, the planner's and destroy's rules (the stack itself: tests/lab/test_cdp.py)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from remirror.cli.cdp import parse_when
from remirror.cli.status_view import status_json, status_text
from remirror.errors import ProfileError, UsageError
from remirror.facts.cdp import (
    INDEX_BYTES,
    INDEX_SLOT,
    Layout,
    MiB,
    RecoveryPoint,
    ThinPoolStatus,
    changed_bytes,
    layout,
    parse_era_invalidate,
    parse_era_status,
    parse_thin_pool_status,
    stack_names,
    tables,
)
from remirror.facts.cdp_index import (
    INDEX_SLOTS,
    CdpIndex,
    CdpPoints,
    decode_index,
    encode_index,
    index_slot_for,
)
from remirror.facts.model import Signature
from remirror.facts.parsers import ParseError
from remirror.facts.site import DiskFacts
from remirror.health import State
from remirror.health.check import DEFAULT_CRITICAL, DEFAULT_WARNING, Status, judge
from remirror.health.metrics import render
from remirror.health.report import MirrorReport, report
from remirror.health.seen import Seen
from remirror.plan import PlanError, make_plan, make_teardown
from remirror.profile import Profile, parse_profile
from remirror.profile.rules import MAX_CDP_POINTS
from remirror.retention import point_due, pruning
from tests.unit.simulated_sites import Sites, wire
from tests.unit.test_cli import TWO_SITE
from tests.unit.test_cli import run as run_cli
from tests.unit.test_facts_parsers import fixture
from tests.unit.test_plan_properties import SECRETS, bare_sites, profile_text, replace_site

EXT4 = Signature("ext4", 0x438, "bebbbe10-27ae-439b-8c3f-662cb952909d", "data")
LAB_MD_SECTORS = 520_192  # a lab mirror of two 256 MiB disks (md's superblock and bitmap taken off)


def with_cdp(cdp: str = "{every: 10s, keep: 1h}", export: bool = False) -> Profile:
    return parse_profile(profile_text("sync", "mutual", 1, export, "wan") + f"    cdp: {cdp}\n")


CDP = with_cdp()


# --- the profile ---------------------------------------------------------------------------------


def test_defaults_keep_a_quarter_of_the_pool_for_history_in_64k_chunks() -> None:
    cdp = CDP.mirrors[0].cdp
    assert cdp is not None
    assert (cdp.every, cdp.keep, cdp.history, cdp.chunk) == (10, 3600, 25, 64 * 1024)


@pytest.mark.parametrize(
    ("cdp", "message"),
    [
        ("{every: 10s, keep: 1h, chunk: 96KiB}", "a multiple of 64KiB"),
        ("{every: 10s, keep: 1h, chunk: 32KiB}", "a multiple of 64KiB"),
        ("{every: 10s, keep: 1h, history: 95}", "less than or equal to 90"),
        ("{every: 1m, keep: 10s}", "shorter than the interval"),
        ("{every: 1s, keep: 7d}", f"keeps 604800 points: at most {MAX_CDP_POINTS}"),
    ],
)
def test_settings_that_cannot_work_are_refused_at_their_line(cdp: str, message: str) -> None:
    with pytest.raises(ProfileError, match=r"<profile>:1[0-9]:\d+: .*" + re.escape(message)):
        with_cdp(cdp)


# --- the layout --------------------------------------------------------------------------------


def test_the_lab_mirror_is_cut_into_aligned_slices_with_a_quarter_kept_for_history() -> None:
    plan = layout(LAB_MD_SECTORS, 64 * 1024, 25)
    assert plan.index == (0, INDEX_BYTES // 512)
    assert plan.tmeta == (INDEX_BYTES // 512, 16 * MiB // 512)  # the floor: a small mirror
    assert plan.emeta[0] == plan.tmeta[0] + plan.tmeta[1]
    assert plan.data[0] == plan.emeta[0] + plan.emeta[1]
    assert plan.data[0] * 512 % MiB == 0
    assert plan.data[0] + plan.data[1] <= LAB_MD_SECTORS
    assert plan.data[1] % plan.chunk_sectors == 0
    assert plan.volume_sectors % plan.chunk_sectors == 0
    assert plan.volume_sectors == plan.data[1] * 75 // 100 // 128 * 128
    assert plan.volume_sectors * 512 > 160 * MiB  # room for the lab's tests


def test_metadata_grows_with_the_mirror() -> None:
    two_tib = 2 * 1024**4 // 512
    plan = layout(two_tib, 64 * 1024, 25)
    assert plan.tmeta[1] * 512 == 4 * 1024**3  # 128 bytes per 64KiB chunk
    assert plan.emeta[1] * 512 == 16 * MiB  # 8 bytes per era block of 1 MiB


def test_the_era_counts_writes_by_the_mib_or_by_the_chunk_when_that_is_larger() -> None:
    # dm-era commits its metadata before the first write to each of its blocks in an era:
    # after a point, blocks of the pool's 64 KiB made nearly every random write wait for one.
    assert layout(LAB_MD_SECTORS, 64 * 1024, 25).era_block == MiB
    assert layout(LAB_MD_SECTORS, 2 * MiB, 25).era_block == 2 * MiB


def test_a_stack_built_before_the_era_block_was_recorded_keeps_the_chunk_as_its_era_block() -> None:
    # Its dm-era was created with blocks of the chunk: rebuilding it with others would make
    # its recorded eras mean other blocks.
    recorded = layout(LAB_MD_SECTORS, 64 * 1024, 25).as_json()
    del recorded["era_block"]
    assert Layout.from_json(recorded).era_block == 64 * 1024
    assert tables("m0", "/dev/md/m0", Layout.from_json(recorded))["volume"].endswith(" 128")


def test_a_mirror_too_small_for_the_metadata_is_refused() -> None:
    with pytest.raises(ValueError, match="too small for CDP"):
        layout(28 * MiB // 512, 64 * 1024, 25)


def test_the_tables_stack_era_on_thin_on_the_pool_on_slices_of_the_mirror() -> None:
    plan = layout(LAB_MD_SECTORS, 64 * 1024, 25)
    built = tables("m0", "/dev/md/m0", plan)
    names = stack_names("m0")
    assert list(built) == list(names)  # build order: slices, pool, thin, the user's volume
    assert built["tdata"] == f"0 {plan.data[1]} linear /dev/md/m0 {plan.data[0]}"
    assert built["pool"].split()[2:4] == ["thin-pool", "/dev/mapper/remirror-m0-cdp-tmeta"]
    assert built["pool"].endswith(" 128 " + str(plan.data[1] // 128 // 10) + " 0")  # zeroing kept on
    assert built["thin"] == f"0 {plan.volume_sectors} thin /dev/mapper/remirror-m0-cdp-pool 0"
    assert built["volume"] == (
        f"0 {plan.volume_sectors} era /dev/mapper/remirror-m0-cdp-emeta /dev/mapper/remirror-m0-cdp-thin 2048"
    )


# --- the index of points ---------------------------------------------------------------------------


def index_with(points: int, sequence: int = 0) -> CdpIndex:
    plan = layout(LAB_MD_SECTORS, 64 * 1024, 25)
    taken = tuple(RecoveryPoint(i + 1, 1_795_400_000.0 + 10 * i, 2 * i + 3) for i in range(points))
    return CdpIndex("m0", plan, taken, next_id=points + 1, sequence=sequence)


def write(data: bytearray, index: CdpIndex) -> CdpIndex:
    """What remirror.agent.cdp.write_index does, on bytes."""
    index = dataclasses.replace(index, sequence=index.sequence + 1)
    slot = index_slot_for(index)
    data[slot * INDEX_SLOT : (slot + 1) * INDEX_SLOT] = encode_index(index, INDEX_SLOT)
    return index


def test_the_index_reads_back_what_was_written_and_the_first_write_starts_the_mirror() -> None:
    data = bytearray(INDEX_BYTES)
    assert decode_index(bytes(data), INDEX_SLOT) is None
    written = write(data, index_with(3))
    assert data[:8] == b"RMRCDP01"  # observe tells a mirror with CDP by its first sector
    assert decode_index(bytes(data), INDEX_SLOT) == written


def test_a_write_cut_short_leaves_the_previous_index() -> None:
    data = bytearray(INDEX_BYTES)
    first = write(data, index_with(3))
    second = write(data, index_with(4, sequence=first.sequence))
    assert decode_index(bytes(data), INDEX_SLOT) == second
    third = dataclasses.replace(index_with(5), sequence=second.sequence + 1)
    torn = encode_index(third, INDEX_SLOT)[:100]  # a crash in the middle of the slot
    slot = index_slot_for(third)
    data[slot * INDEX_SLOT : slot * INDEX_SLOT + 100] = torn
    data[slot * INDEX_SLOT + 200] ^= 0xFF
    assert decode_index(bytes(data), INDEX_SLOT) == second
    assert INDEX_SLOTS == 2


def test_the_most_points_a_profile_may_keep_fit_in_a_slot() -> None:
    big = index_with(MAX_CDP_POINTS)
    big = dataclasses.replace(
        big, points=tuple(dataclasses.replace(p, id=p.id + 10**7, era=p.era + 10**8) for p in big.points)
    )
    assert len(encode_index(big, INDEX_SLOT)) == INDEX_SLOT


def test_points_are_found_by_id_or_by_time() -> None:
    index = index_with(3)
    assert index.point("#2") == index.point("2") == index.points[1]
    assert index.point("9") is None
    assert index.at_or_before(1_795_400_015.0) == index.points[1]
    assert index.at_or_before(1_795_399_999.0) is None


# --- when points are taken and pruned ------------------------------------------------------------------


def test_a_point_is_due_when_none_exists_or_the_newest_is_every_old() -> None:
    index = index_with(1)
    newest = index.points[-1].time
    assert point_due(index_with(0), newest, 10)
    assert not point_due(index, newest + 8, 10)
    assert point_due(index, newest + 9.5, 10)  # a timer a little early still takes it


def test_the_daemon_takes_its_points_every_every_not_a_tenth_sooner() -> None:
    # The daemon looks every 5 s at an hourly `every`: early by half that, never by 6 minutes.
    index = index_with(1)
    newest = index.points[-1].time
    assert not point_due(index, newest + 3240, 3600, early=2.5)  # 0.9 of `every`: a timer's slack
    assert not point_due(index, newest + 3597, 3600, early=2.5)
    assert point_due(index, newest + 3597.5, 3600, early=2.5)
    assert point_due(index_with(0), newest, 3600, early=2.5)


def test_points_older_than_the_window_go_but_the_newest_always_stays() -> None:
    index = index_with(5)  # every 10 s from t0
    now = index.points[-1].time + 5
    assert [p.id for p in pruning(index, now, 25, None).points] == [1, 2]
    assert [p.id for p in pruning(index, now + 10_000, 25, None).points] == [1, 2, 3, 4]


def test_a_pool_short_of_space_gives_up_the_oldest_point_within_the_window() -> None:
    index = index_with(3)
    now = index.points[-1].time
    full = ThinPoolStatus(1, 10, 100, 950, 1000, "rw")
    roomy = dataclasses.replace(full, data_used=500)
    assert pruning(index, now, 3600, roomy).points == ()
    early = pruning(index, now, 3600, full)
    assert ([p.id for p in early.expired], [p.id for p in early.for_space]) == ([], [1])
    one = index_with(1)
    assert pruning(one, now, 3600, full).points == ()  # never the last point


def test_changed_era_blocks_become_byte_ranges_clipped_to_the_volume() -> None:
    chunk = MiB  # an era block
    assert changed_bytes([(10, 11), (100, 116)], chunk, 200 * chunk) == [
        (10 * chunk, chunk),
        (100 * chunk, 16 * chunk),
    ]
    assert changed_bytes([(199, 201)], chunk, 200 * chunk) == [(199 * chunk, chunk)]


# --- the planner -------------------------------------------------------------------------------------


def converged(profile: Profile) -> Sites:
    sites = Sites(bare_sites())
    sites.run(make_plan(profile, sites.facts, SECRETS))
    assert make_plan(profile, sites.facts, SECRETS).is_empty
    return sites


def test_a_new_mirror_gets_its_stack_after_the_array_and_before_the_export() -> None:
    profile = with_cdp(export=True)
    actions = make_plan(profile, bare_sites(), SECRETS).actions
    verbs: list[str] = [a.verb for a in actions]
    create = actions[verbs.index("CreateCdp")]
    assert verbs.index("CreateArray") < verbs.index("CreateCdp") < verbs.index("CreateBackstore", 3)
    assert not create.destructive
    assert wire(create)[0] | {"kind": "cdp_stack", "fresh": True, "allow_data": False} == wire(create)[0]
    export = next(a for a in actions if a.verb == "CreateBackstore" and "export" in a.subject)
    assert "/dev/mapper/remirror-m0-cdp" in export.subject  # applications use the volume


def test_cdp_added_to_a_mirror_that_holds_data_is_destructive() -> None:
    plain = parse_profile(profile_text("sync", "mutual", 1, False, "wan"))
    sites = converged(plain)
    md = DiskFacts("/dev/md/m0", True, "md127", 1 << 30, (EXT4,), first_sector="other")
    facts = replace_site(sites.facts, "a", disks={**sites.facts["a"].disks, "/dev/md/m0": md})
    (create,) = make_plan(CDP, facts, SECRETS).actions
    assert create.verb == "CreateCdp"
    assert "ext4 filesystem labelled 'data'" in create.destructive
    assert wire(create)[0]["allow_data"] is True
    blank = dataclasses.replace(md, signatures=(), first_sector="zero")
    facts = replace_site(sites.facts, "a", disks={**sites.facts["a"].disks, "/dev/md/m0": blank})
    (create,) = make_plan(CDP, facts, SECRETS).actions
    assert (create.destructive, wire(create)[0]["allow_data"]) == ("", False)


def test_a_stack_taken_down_is_activated_again_not_created() -> None:
    sites = converged(CDP)
    names = set(stack_names("m0").values())
    down = replace_site(sites.facts, "a", dm={n: d for n, d in sites.facts["a"].dm.items() if n not in names})
    (activate,) = make_plan(CDP, down, SECRETS).actions
    assert (activate.verb, activate.destructive) == ("ActivateCdp", "")


def test_cdp_cannot_be_dropped_from_a_mirror_that_carries_a_stack() -> None:
    sites = converged(CDP)
    plain = parse_profile(profile_text("sync", "mutual", 1, False, "wan"))
    with pytest.raises(PlanError, match=r"<profile>:8:\d+: site a: m0 carries a CDP stack"):
        make_plan(plain, sites.facts, SECRETS)


def test_destroy_takes_the_stack_and_its_views_down_before_the_array() -> None:
    sites = converged(CDP)
    view = dataclasses.replace(sites.facts["a"].dm["remirror-m0-cdp"], name="remirror-m0-cdp-at-7")
    facts = replace_site(sites.facts, "a", dm={**sites.facts["a"].dm, "remirror-m0-cdp-at-7": view})
    actions = make_teardown(CDP, CDP.mirrors[0], facts).actions
    verbs: list[str] = [a.verb for a in actions]
    assert verbs.index("DeactivateCdp") < verbs.index("StopArray")
    assert wire(actions[verbs.index("DeactivateCdp")])[0]["views"] == ["remirror-m0-cdp-at-7"]


def test_destroy_refuses_while_the_volume_is_mounted_but_not_for_the_stack_holding_the_mirror() -> None:
    sites = converged(CDP)
    stack = {d.kernel_name for n, d in sites.facts["a"].dm.items() if n.startswith("remirror-m0-cdp")}
    md = dataclasses.replace(
        sites.facts["a"].disks.get("/dev/md/m0", DiskFacts("/dev/md/m0", True, "md127", 1 << 30)),
        holders=tuple(sorted(stack)),
    )
    facts = replace_site(sites.facts, "a", disks={**sites.facts["a"].disks, "/dev/md/m0": md})
    assert "StopArray" in [a.verb for a in make_teardown(CDP, CDP.mirrors[0], facts).actions]
    volume = dataclasses.replace(facts["a"].disks["/dev/mapper/remirror-m0-cdp"], mounts=("/srv",))
    facts = replace_site(facts, "a", disks={**facts["a"].disks, "/dev/mapper/remirror-m0-cdp": volume})
    with pytest.raises(PlanError, match=re.escape("/dev/md/m0 is in use (mounted on /srv)")):
        make_teardown(CDP, CDP.mirrors[0], facts)


# --- status and check -----------------------------------------------------------------------------


def reported(points: CdpPoints | None, pool: ThinPoolStatus | None, now: float) -> MirrorReport:
    sites = converged(CDP)
    a = sites.facts["a"]
    md = a.disks.get("/dev/md/m0", DiskFacts("/dev/md/m0", True, "md127", 1 << 30))
    dm = dict(a.dm)
    dm["remirror-m0-cdp-pool"] = dataclasses.replace(dm["remirror-m0-cdp-pool"], pool=pool)
    facts = replace_site(
        sites.facts, "a", disks={**a.disks, "/dev/md/m0": dataclasses.replace(md, cdp_points=points)}, dm=dm
    )
    (mirror,) = report(CDP, facts, Seen({}), now)
    return mirror


POOL = ThinPoolStatus(7, 20, 4096, 1000, 3000, "rw")


def test_status_shows_the_points_the_window_and_the_pool() -> None:
    now = 1_795_400_000.0
    r = reported(CdpPoints(360, now - 3600, now - 4), POOL, now)
    assert r.cdp is not None
    assert (r.cdp.points, r.cdp.newest_age_seconds, r.cdp.window_seconds) == (360, 4, 3600)
    assert (r.cdp.pool_used_bytes, r.cdp.pool_total_bytes) == (1000 * 65536, 3000 * 65536)
    assert not r.cdp.overdue
    text = status_text([r], now)
    assert "cdp 360 point(s)  newest 4s ago  window 1h of 1h  pool" in text
    assert status_json(r)["cdp"]["overdue"] is False
    assert 'remirror_cdp_newest_point_age_seconds{profile="p",mirror="m0"} 4' in render([r], now, "p", "1")


@pytest.mark.parametrize(
    ("points", "pool", "status", "words"),
    [
        (CdpPoints(3, 0.0, -25.0), POOL, Status.WARNING, "CDP newest point 25s old, every 10s"),
        (CdpPoints(0, None, None), POOL, Status.WARNING, "CDP no point yet"),
        (CdpPoints(3, 0.0, -5.0), dataclasses.replace(POOL, mode="out_of_data_space"), Status.CRITICAL,
         "CDP pool out_of_data_space"),
        (CdpPoints(3, 0.0, -5.0), None, Status.CRITICAL, "CDP stack not active"),
    ],
)  # fmt: skip
def test_check_warns_of_a_missed_point_and_is_critical_when_the_pool_cannot_take_writes(
    points: CdpPoints, pool: ThinPoolStatus | None, status: Status, words: str
) -> None:
    r = reported(points, pool, 0.0)
    assert r.state is State.MIRRORED  # the mirror is fine: the verdict is about CDP
    verdict = judge([r], DEFAULT_WARNING, DEFAULT_CRITICAL)
    assert verdict.status is status, verdict.text
    assert words in verdict.text


# --- the verbs' input --------------------------------------------------------------------------------


def test_cdp_verbs_name_a_mirror_without_cdp_or_not_assembled_here_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_cli(capsys, "cdp", "list", TWO_SITE, "mail")
    assert (code, out) == (3, "")
    assert err.strip().splitlines()[-1].endswith("cdp: mirror mail has no `cdp` in the profile")
    code, _, err = run_cli(capsys, "cdp", "list", TWO_SITE, "finance")
    assert code == 3
    assert "/dev/md/finance is not assembled on this host (run cdp on the primary)" in err
    code, _, err = run_cli(capsys, "cdp", "list", TWO_SITE, "nope")
    assert code == 3
    assert "no mirror 'nope' in the profile (finance, mail)" in err


def test_times_are_iso_or_relative_to_now() -> None:
    now = 1_795_400_000.0
    assert parse_when("-10m", now) == now - 600
    assert parse_when("2026-11-22T10:00:00+00:00", now) == 1_795_341_600.0
    with pytest.raises(UsageError, match="not a point id, a time"):
        parse_when("yesterday", now)


def test_an_array_only_assembled_in_this_run_gets_its_stack_activated_never_created_over_data() -> None:
    sites = converged(CDP)
    names = set(stack_names("m0").values())
    a = sites.facts["a"]
    restarted = replace_site(
        sites.facts,
        "a",
        arrays=(),
        array_links={},
        dm={n: d for n, d in a.dm.items() if n not in names},
        disks={p: d for p, d in a.disks.items() if p not in ("/dev/md/m0", "/dev/mapper/remirror-m0-cdp")},
    )
    actions = make_plan(CDP, restarted, SECRETS).actions
    verbs: list[str] = [a.verb for a in actions]
    assert verbs.index("AssembleArray") < verbs.index("ActivateCdp")
    step = wire(actions[verbs.index("ActivateCdp")])[0]
    assert (step["fresh"], step["allow_data"]) == (False, False)  # the step refuses data it finds


# --- the parsers (recorded on the lab kernel: fixtures/lab-6.1/record-cdp.sh) ---------------------------


def test_era_status_gives_the_era_and_whether_a_metadata_snapshot_is_held() -> None:
    status = parse_era_status(fixture("dmsetup-status-era-points.txt"))
    held = parse_era_status(fixture("dmsetup-status-era-held.txt"))
    assert status.current_era > parse_era_status(fixture("dmsetup-status-era-new.txt")).current_era
    assert (status.metadata_snap_held, held.metadata_snap_held) == (False, True)
    assert 0 < status.metadata_used <= status.metadata_total
    with pytest.raises(ParseError, match="not a dm-era status line"):
        parse_era_status(fixture("dmsetup-status-thin-pool-new.txt"))


def test_thin_pool_status_gives_its_use_in_chunks_and_its_mode() -> None:
    new = parse_thin_pool_status(fixture("dmsetup-status-thin-pool-new.txt"))
    points = parse_thin_pool_status(fixture("dmsetup-status-thin-pool-points.txt"))
    pruned = parse_thin_pool_status(fixture("dmsetup-status-thin-pool-pruned.txt"))
    assert new.healthy
    assert points.healthy
    assert new.data_total == points.data_total > points.data_used > new.data_used
    assert pruned.healthy
    assert pruned.data_used > 0
    assert parse_thin_pool_status("0 1024 thin-pool Fail").mode == "Fail"


def test_era_invalidate_lists_blocks_and_ranges_merged() -> None:
    since_1 = parse_era_invalidate(fixture("era-invalidate-since-point-1.xml"))
    since_2 = parse_era_invalidate(fixture("era-invalidate-since-point-2.xml"))
    assert since_2 == [(30, 31), (100, 116)]
    assert since_1 == [(10, 11), (20, 21), (30, 31), (100, 116)]
    text = '<blocks>\n  <block block="3"/>\n  <range begin="4" end = "6"/>\n  <block block="9"/>\n</blocks>'
    assert parse_era_invalidate(text) == [(3, 6), (9, 10)]
    with pytest.raises(ParseError):
        parse_era_invalidate("era_invalidate: bad metadata")


def test_new_metadata_is_zeroed_exactly_in_large_writes(tmp_path: Path) -> None:
    from remirror.agent.cdp import _zero

    disk = tmp_path / "md"
    disk.write_bytes(b"\xff" * (4 << 20))
    _zero(str(disk), start=2048, sectors=3 * 1024)  # 1 MiB in, 1.5 MiB long: a partial last write
    data = disk.read_bytes()
    assert data[: 1 << 20] == b"\xff" * (1 << 20)
    assert data[1 << 20 : (5 << 20) // 2] == bytes(3 << 19)
    assert data[(5 << 20) // 2 :] == b"\xff" * ((3 << 20) // 2)
