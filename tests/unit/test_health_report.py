"""status, check and metrics from facts: out-of-sync bytes, RPO, resync, verdicts, Prometheus text."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from remirror.facts.dm import parse_dm_table
from remirror.facts.model import CacheStatus
from remirror.facts.parsers import parse_bitmap_examine
from remirror.facts.site import DmDevice, SiteFacts
from remirror.health import State, assess
from remirror.health.check import DEFAULT_CRITICAL, DEFAULT_WARNING, Limit, Range, Status, judge
from remirror.health.metrics import render
from remirror.health.report import MirrorReport, report
from remirror.health.seen import Seen
from remirror.profile.names import cache_name
from tests.unit.test_facts_parsers import fixture
from tests.unit.test_health_state import SYNC, applied, with_members, with_session
from tests.unit.test_plan_properties import PROFILES

MIRROR = SYNC.mirrors[0]
NOW = 1_800_000_000.0
# Recorded in the lab (fixtures/lab-6.1): 4 dirty chunks of 1 MiB after a cut link.
DIRTY = parse_bitmap_examine(fixture("mdadm-X-a0-dirty.txt"))


def with_bitmap(facts: dict[str, SiteFacts]) -> dict[str, SiteFacts]:
    primary = facts["a"]
    disk = dataclasses.replace(primary.disks[MIRROR.primary.disk], bitmap=DIRTY)
    return {**facts, "a": dataclasses.replace(primary, disks={**primary.disks, disk.path: disk})}


def cut(facts: dict[str, SiteFacts]) -> dict[str, SiteFacts]:
    """The replica leg failed by md after a link cut, the bitmap counting what it missed."""
    return with_bitmap(with_session(with_members(facts, {"in_sync"}, {"faulty", "write_mostly"}), "FAILED"))


NEVER = Seen({})


def one(facts: dict[str, SiteFacts | None], seen: Seen = NEVER) -> MirrorReport:
    (mirror,) = report(SYNC, facts, seen, NOW)
    return mirror


def test_a_mirrored_mirror_misses_nothing_and_its_replica_is_current() -> None:
    facts = applied(SYNC)
    facts["a"] = dataclasses.replace(facts["a"], portal_rtt={str(MIRROR.replicas[0].portal_address): 0.025})
    r = one(dict(facts))
    assert r.state is State.MIRRORED
    replica = r.legs[1]
    assert (replica.out_of_sync_bytes, replica.rpo_seconds, replica.rtt_seconds) == (0, 0.0, 0.025)
    assert (r.out_of_sync_bytes, r.rpo_seconds) == (0, 0.0)


def test_a_cut_replica_misses_what_the_bitmap_marks_and_ages_from_when_it_was_last_in_sync() -> None:
    seen = Seen({MIRROR.name: {"b": NOW - 95}})
    r = one(dict(cut(applied(SYNC))), seen)
    assert r.state is State.MIRROR_DEFUNCT
    assert r.legs[1].out_of_sync_bytes == 4 * 1024**2
    assert r.legs[1].rpo_seconds == 95
    assert r.legs[0].out_of_sync_bytes == 0  # the primary is the reference


def test_a_replica_never_seen_in_sync_has_an_unknown_rpo() -> None:
    assert one(dict(cut(applied(SYNC)))).legs[1].rpo_seconds is None


def test_seen_records_only_replica_legs_in_sync() -> None:
    healthy = assess(SYNC, MIRROR, applied(SYNC))
    broken = assess(SYNC, MIRROR, cut(applied(SYNC)))
    assert Seen({}).updated([healthy], NOW).in_sync_at == {MIRROR.name: {"b": NOW}}
    old = Seen({MIRROR.name: {"b": NOW - 60}})
    assert old.updated([broken], NOW) == old


def test_a_recovery_reports_progress_speed_and_an_eta_from_what_the_bitmap_has_left() -> None:
    facts = with_bitmap(with_members(applied(SYNC), {"in_sync"}, {"write_mostly"}, sync_action="recover"))
    (array,) = facts["a"].arrays
    facts["a"] = dataclasses.replace(facts["a"], arrays=(dataclasses.replace(array, sync_speed=2 * 1024**2),))
    r = one(dict(facts))
    assert r.state is State.SYNCING
    assert r.resync is not None
    assert (r.resync.percent, r.resync.speed, r.resync.eta_seconds) == (10.0, 2 * 1024**2, 2.0)
    verdict = judge([r], DEFAULT_WARNING, DEFAULT_CRITICAL)
    assert verdict.status is Status.WARNING
    assert verdict.text.startswith(
        f"REMIRROR WARNING - {MIRROR.name} SYNCING: md is running recover, 10.0% done"
    )


def test_check_of_a_healthy_mirror_is_ok_with_perfdata() -> None:
    verdict = judge([one(dict(applied(SYNC)))], DEFAULT_WARNING, DEFAULT_CRITICAL)
    assert verdict.status is Status.OK
    summary, _, perfdata = verdict.text.partition(" | ")
    assert summary == f"REMIRROR OK - {MIRROR.name} MIRRORED"
    assert perfdata.split() == [
        f"'{MIRROR.name}", f"out_of_sync'=0B;{256 * 1024**2};{1024**3};0",
        f"'{MIRROR.name}", "rpo'=0s;900;3600;0",
        f"'{MIRROR.name}", "resync'=100%;;;0;100",
        f"'{MIRROR.name}", "cache_dirty'=0;;;0",
        f"'{MIRROR.name}", "in_flight'=U;;;0",  # the model's sites read no `inflight`
    ]  # fmt: skip


def test_check_of_a_cut_link_is_critical_naming_the_mirror_and_the_leg() -> None:
    verdict = judge([one(dict(cut(applied(SYNC))))], DEFAULT_WARNING, DEFAULT_CRITICAL)
    assert verdict.status is Status.CRITICAL
    assert verdict.text.startswith(
        f"REMIRROR CRITICAL - {MIRROR.name} MIRROR_DEFUNCT: replica leg on b is faulty (session FAILED) | "
    )
    assert f"'{MIRROR.name} out_of_sync'={4 * 1024**2}B;" in verdict.text
    assert f"'{MIRROR.name} rpo'=U;900;3600;0" in verdict.text  # unknown takes no unit (not `UB`)


def test_an_unreachable_replica_site_is_critical_for_its_leg() -> None:
    facts: dict[str, SiteFacts | None] = {**applied(SYNC), "b": None}
    verdict = judge([one(facts)], DEFAULT_WARNING, DEFAULT_CRITICAL)
    assert verdict.status is Status.CRITICAL
    assert f"{MIRROR.name} MIRRORED: site unreachable for replica leg on b" in verdict.text


def test_an_unreachable_primary_site_is_critical() -> None:
    facts: dict[str, SiteFacts | None] = {**applied(SYNC), "a": None}
    verdict = judge([one(facts)], DEFAULT_WARNING, DEFAULT_CRITICAL)
    assert verdict.status is Status.CRITICAL
    assert "site unreachable for primary leg on a" in verdict.text


def test_thresholds_on_out_of_sync_bytes_and_rpo() -> None:
    syncing = with_bitmap(with_members(applied(SYNC), {"in_sync"}, {"write_mostly"}, sync_action="recover"))
    r = one(dict(syncing), Seen({MIRROR.name: {"b": NOW - 600}}))
    critical = judge([r], Limit.parse("1MiB"), Limit.parse("3MiB"))  # 4 MiB missing
    assert critical.status is Status.CRITICAL
    assert "4MiB out of sync > 3MiB" in critical.text
    assert ";1048576;3145728;0" in critical.text  # perfdata's warn and crit, in bytes
    assert judge([r], Limit.parse("1GiB,1m"), Limit.parse("1GiB,5m")).status is Status.CRITICAL  # 10 min old
    assert judge([r], Limit.parse("1GiB,1m"), Limit.parse("1GiB,1h")).status is Status.WARNING
    # The plugins' range syntax: `@` alerts inside the range, and perfdata carries it as given.
    inside = judge([r], Limit.parse("1GiB"), Limit.parse("@2MiB:8MiB"))
    assert inside.status is Status.CRITICAL
    assert "out of sync inside 2MiB:8MiB" in inside.text
    assert ";1073741824;@2097152:8388608;0" in inside.text


@pytest.mark.parametrize(
    ("text", "limit"),
    [
        ("256MiB,15m", Limit(Range(0, 256 * 1024**2), Range(0, 900))),
        ("1GiB", Limit(Range(0, 1024**3))),
        ("0,30s", Limit(Range(0, 0), Range(0, 30))),
        ("10MiB:,~:1h", Limit(Range(10 * 1024**2), Range(-math.inf, 3600))),
        ("@1MiB:2MiB", Limit(Range(1024**2, 2 * 1024**2, inside=True))),
    ],
)
def test_limits_parse_in_the_plugins_range_syntax(text: str, limit: Limit) -> None:
    assert Limit.parse(text) == limit


@pytest.mark.parametrize(
    ("value", "text", "alerts"),
    [(11, "10", True), (10, "10", False), (-1, "10", True), (5, "10:", True), (5, "~:10", False),
     (-5, "~:10", False), (15, "10:20", False), (25, "10:20", True), (15, "@10:20", True), (25, "@10:20", False)],
)  # fmt: skip
def test_a_range_alerts_as_the_plugin_guidelines_say(value: float, text: str, alerts: bool) -> None:
    assert Range.parse(text, float).alerts(value) is alerts


@pytest.mark.parametrize("text", ["lots", "1GiB,soon", "", "@", "20:10", "1GiB,@"])
def test_bad_limits_are_refused(text: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - the CLI shows whatever the reason is
        Limit.parse(text)


def test_metrics_are_valid_prometheus_text_with_base_units() -> None:
    reports = [one(dict(cut(applied(SYNC))), Seen({MIRROR.name: {"b": NOW - 30}}))]
    text = render(reports, NOW, "p1", "9.9")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    every = [s for f in families.values() for s in f.samples]
    assert {s.labels.get("profile") for s in every} == {"p1"}  # on every series
    samples = {(s.name, tuple(sorted(s.labels.items() - {("profile", "p1")}))): s.value for s in every}
    assert samples[("remirror_build_info", (("version", "9.9"),))] == 1
    leg = (("leg", "b"), ("mirror", MIRROR.name), ("role", "replica"))
    assert samples[("remirror_leg_out_of_sync_bytes", leg)] == 4 * 1024**2
    assert samples[("remirror_rpo_seconds", leg)] == 30
    assert samples[("remirror_session_up", leg)] == 0
    assert samples[("remirror_mirror_state", (("mirror", MIRROR.name), ("state", "MIRROR_DEFUNCT")))] == 1
    assert samples[("remirror_mirror_state", (("mirror", MIRROR.name), ("state", "MIRRORED")))] == 0
    assert samples[("remirror_site_up", (("site", "b"),))] == 1
    assert samples[("remirror_check_timestamp_seconds", ())] == NOW
    assert all(name.startswith("remirror_") for name in families)
    assert "remirror_link_rtt_seconds" not in families  # not measured: left out, not a false 0


def test_metric_label_values_are_escaped() -> None:
    r = dataclasses.replace(one(dict(applied(SYNC))), mirror='we"ird\\name')
    families = list(text_string_to_metric_families(render([r], NOW, "p1", "9.9")))
    labels = {s.labels.get("mirror") for f in families for s in f.samples}
    assert 'we"ird\\name' in labels


def test_the_state_file_dates_replicas_across_runs(tmp_path: Path) -> None:
    from remirror.monitor import load_seen, record_in_sync, state_file

    healthy = assess(SYNC, MIRROR, applied(SYNC))
    seen = record_in_sync(SYNC, [healthy])
    assert load_seen(SYNC) == seen
    assert state_file(SYNC).parent == tmp_path / "state"
    state_file(SYNC).write_text("{not json")
    assert load_seen(SYNC) == Seen({})  # a broken file costs the RPO, never the check


def test_status_text_and_json_show_what_a_cut_leg_misses() -> None:
    from remirror.cli.status_view import status_json, status_text

    r = one(dict(cut(applied(SYNC))), Seen({MIRROR.name: {"b": NOW - 72}}))
    lines = status_text([r], NOW).splitlines()
    why = "site b: cannot connect to dr1:22: Connection refused"
    assert status_text([r], NOW, {"b": why}).splitlines() == [*lines, f"site b unreachable: {why}"]
    assert (
        lines[0]
        == f"{MIRROR.name} {MIRROR.md_device} sync: MIRROR_DEFUNCT: replica leg on b is faulty (session FAILED)"
    )
    assert lines[-1].split() == [
        "replica", "b:/dev/b0", "faulty", "write-mostly", "session", "FAILED", "out-of-sync", "4MiB", "rpo", "1m12s",
    ]  # fmt: skip
    document = status_json(r)
    assert (document["state"], document["out_of_sync_bytes"], document["rpo_seconds"]) == (
        "MIRROR_DEFUNCT",
        4 * 1024**2,
        72,
    )
    assert document["legs"][1]["session"] == "FAILED"


def with_replica_cache(facts: dict[str, SiteFacts], status: CacheStatus) -> dict[str, SiteFacts]:
    """A writecache in front of the replica's disk, as `dmsetup status` reported it."""
    name = cache_name(MIRROR, "b")
    table = parse_dm_table("0 524288 writecache s 254:1 254:11 4096 4 high_watermark 50 low_watermark 45")
    device = DmDevice(name, "dm-101", table, status)
    return {**facts, "b": dataclasses.replace(facts["b"], dm={name: device})}


def test_a_replica_cache_shows_its_dirty_and_writeback_data_in_status_and_metrics() -> None:
    r = one(dict(with_replica_cache(applied(SYNC), CacheStatus(16384, 1536, 12))))
    assert (r.legs[1].cache_dirty_blocks, r.legs[1].cache_writeback_blocks) == (1536, 12)
    assert r.legs[0].cache_dirty_blocks is None  # no cache on the primary leg
    text = render([r], NOW, "p1", "9.9")
    # In bytes, from the writecache's 4 KiB blocks.
    assert f'remirror_cache_dirty_bytes{{profile="p1",mirror="m0",leg="b",role="replica"}} {1536 * 4096}' in (
        text.splitlines()
    )
    assert (
        f'remirror_cache_writeback_bytes{{profile="p1",mirror="m0",leg="b",role="replica"}} {12 * 4096}'
        in (text.splitlines())
    )
    assert judge([r], DEFAULT_WARNING, DEFAULT_CRITICAL).status is Status.OK


def test_a_cache_with_an_error_is_critical() -> None:
    r = one(dict(with_replica_cache(applied(SYNC), CacheStatus(16384, 900, 0, error=5))))
    verdict = judge([r], DEFAULT_WARNING, DEFAULT_CRITICAL)
    assert verdict.status is Status.CRITICAL
    assert "cache error on the replica leg on b (error 5)" in verdict.text.splitlines()[0]


ASYNC = PROFILES["async-none-1r-lan"]


def test_an_async_mirror_whose_local_leg_is_first_warns_that_writes_wait_for_the_replica() -> None:
    facts = applied(ASYNC)
    (array,) = facts["a"].arrays
    local_first = tuple(
        dataclasses.replace(m, slot=0 if "write_mostly" not in m.state else 1) for m in array.members
    )
    facts["a"] = dataclasses.replace(facts["a"], arrays=(dataclasses.replace(array, members=local_first),))
    (r,) = report(ASYNC, dict(facts), NEVER, NOW)
    assert r.state is State.MIRRORED
    assert any("async writes wait for the replica" in note for note in r.notes), r.notes
    assert judge([r], DEFAULT_WARNING, DEFAULT_CRITICAL).status is Status.WARNING
    # As apply builds it (the replica first), or in sync mode, there is nothing to say.
    (built,) = report(ASYNC, dict(applied(ASYNC)), NEVER, NOW)
    assert built.notes == ()


def test_writes_held_by_md_are_critical_and_the_replicas_writes_in_flight_are_shown() -> None:
    facts = applied(SYNC)
    (array,) = facts["a"].arrays
    members = tuple(
        dataclasses.replace(m, writes_in_flight=5 if "write_mostly" in m.state else 0) for m in array.members
    )
    held = dataclasses.replace(array, members=members, writes_suspended=True)
    facts["a"] = dataclasses.replace(facts["a"], arrays=(held,))
    r = one(dict(facts))
    assert r.writes_held
    assert r.legs[1].writes_in_flight == 5
    verdict = judge([r], DEFAULT_WARNING, DEFAULT_CRITICAL)
    assert verdict.status is Status.CRITICAL
    assert "md holds every write to /dev/md/m0" in verdict.text
    assert f"'{MIRROR.name} in_flight'=5;;;0" in verdict.text
    metrics = {
        (s.name, s.labels.get("leg", "")): s.value
        for family in text_string_to_metric_families(render([r], NOW, "p1", "9.9"))
        for s in family.samples
    }
    assert metrics[("remirror_leg_writes_in_flight", "b")] == 5
    assert metrics[("remirror_writes_held", "")] == 1


def test_an_async_session_on_which_writes_may_overtake_each_other_warns_of_a_torn_copy() -> None:
    facts = applied(ASYNC)
    sessions = tuple(
        dataclasses.replace(s, initial_r2t=True, immediate_data=True, first_burst=65536)
        for s in facts["a"].sessions
    )
    facts["a"] = dataclasses.replace(facts["a"], sessions=sessions)
    (r,) = report(ASYNC, dict(facts), NEVER, NOW)
    assert any("may be torn" in note and "InitialR2T Yes" in note for note in r.notes), r.notes
    assert judge([r], DEFAULT_WARNING, DEFAULT_CRITICAL).status is Status.WARNING
