"""DR drills (docs/drill.md): the profile's `drill`, the record, and what status, check and
metrics make of it. The drill itself runs on a real kernel: tests/lab/test_security.py (TestDrills)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from remirror.errors import ProfileError
from remirror.facts.drill import CheckRun, DrillRecord, Drills, record_from_json
from remirror.facts.site import SiteFacts, site_facts
from remirror.health.check import DEFAULT_CRITICAL, DEFAULT_WARNING, Status, judge
from remirror.health.metrics import render
from remirror.health.report import MirrorReport, report
from remirror.health.seen import Seen
from remirror.plan import make_plan, make_teardown
from remirror.plan.actions import Verb
from remirror.profile import parse_profile
from tests.unit.simulated_sites import Sites
from tests.unit.test_plan_properties import SECRETS, bare_sites
from tests.unit.test_points import PROFILE

DAY = 86400.0
DRILLED = PROFILE.replace("keep: 7d}}", "keep: 7d}, drill: {every: 7d, run: [/usr/local/sbin/check-db]}}")
NOW = 1_800_000_000.0


def record(started: float, passed: bool = True) -> DrillRecord:
    check = CheckRun("/usr/local/sbin/check-db", 0 if passed else 1, 12.5, "balances agree\n")
    return DrillRecord(
        mirror="m0",
        site="b",
        started=started,
        finished=started + 40,
        point=7,
        point_time=started - 90,
        point_taken_by_drill=False,
        checks=(check,),
        checks_passed_at=started + 31.5 if passed else None,
    )


def test_a_record_gives_the_rpo_and_rto_it_proves_and_reads_back() -> None:
    done = record(NOW)
    assert (done.passed, done.rpo, done.rto) == (True, 90.0, 31.5)
    data = json.loads(json.dumps(done.as_json()))
    assert data["kind"] == "remirror-drill"
    assert (data["rpo_seconds"], data["rto_seconds"], data["passed"]) == (90.0, 31.5, True)
    assert record_from_json(data) == done
    assert done.stamp == "20270115T080000Z"
    summary = done.summary()
    assert summary.startswith("DR drill of m0 at b: PASSED (a throwaway copy: the mirror was not promoted")
    assert "RTO      31.5s" in summary
    assert "promote " not in summary.lower()  # never reads as a promotion


def test_a_failed_check_or_an_error_fails_the_drill_and_proves_no_rto() -> None:
    assert not record(NOW, passed=False).passed
    assert record(NOW, passed=False).rto is None
    broken = dataclasses.replace(record(NOW), error="mount: wrong fs type")
    assert not broken.passed
    assert broken.rto is None
    assert "FAILED" in broken.summary()
    with pytest.raises(ValueError, match="not a remirror drill record"):
        record_from_json({"kind": "something else"})


def test_a_drill_needs_the_legs_own_points() -> None:
    parse_profile(DRILLED)
    without = DRILLED.replace("points: {every: 1h, keep: 7d}, ", "")
    with pytest.raises(ProfileError, match=r"replicas\[0\]\.drill: needs points on the same leg"):
        parse_profile(without)


def test_a_drill_is_critical_after_every_plus_a_day_unless_given() -> None:
    drill = parse_profile(DRILLED).mirrors[0].replicas[0].drill
    assert drill is not None
    assert drill.critical == 8 * DAY
    given = parse_profile(DRILLED.replace("every: 7d,", "every: 7d, critical_after: 10d,"))
    assert given.mirrors[0].replicas[0].drill.critical == 10 * DAY  # type: ignore[union-attr]


def _reports(kept: Drills | None, profile_text: str = DRILLED) -> list[MirrorReport]:
    profile = parse_profile(profile_text)
    sites = Sites(bare_sites())
    facts: dict[str, SiteFacts] = sites.run(make_plan(profile, sites.facts, SECRETS))
    if kept is not None:
        facts = {**facts, "b": dataclasses.replace(facts["b"], drills={"m0.b": kept})}
    # Its own points are fresh: only the drills can make check speak.
    return report(profile, facts, Seen({}), NOW)


def _fresh_points(reports: list[MirrorReport]) -> list[MirrorReport]:
    legs = [
        dataclasses.replace(leg, points=dataclasses.replace(leg.points, newest_age_seconds=60.0))
        if leg.points is not None
        else leg
        for leg in reports[0].legs
    ]
    return [dataclasses.replace(reports[0], legs=tuple(legs))]


@pytest.mark.parametrize(
    ("kept", "status", "words"),
    [
        (Drills(record(NOW - 2 * DAY), record(NOW - 2 * DAY)), Status.OK, "m0 MIRRORED"),
        (Drills(None, None), Status.WARNING, "never drilled at b"),
        (
            Drills(record(NOW - DAY, passed=False), record(NOW - 3 * DAY)),
            Status.WARNING,
            "the last drill at b FAILED 1d ago",
        ),
        (
            Drills(record(NOW - 9 * DAY), record(NOW - 9 * DAY)),
            Status.CRITICAL,
            "no passing drill at b for 9d",
        ),
        (
            Drills(record(NOW - DAY, passed=False), None),
            Status.CRITICAL,
            "no drill at b has passed (the last FAILED 1d ago)",
        ),
    ],
)
def test_check_judges_the_last_passing_drill_against_the_schedule(
    kept: Drills, status: Status, words: str
) -> None:
    verdict = judge(_fresh_points(_reports(kept)), DEFAULT_WARNING, DEFAULT_CRITICAL)
    assert verdict.status == status, verdict.text
    assert words in verdict.text


def test_status_and_metrics_show_the_last_drill() -> None:
    from remirror.cli.status_view import status_json, status_text

    reports = _reports(Drills(record(NOW - 3600, passed=False), record(NOW - 2 * DAY)))
    text = status_text(reports, NOW)
    assert "drill: FAILED 1h ago, last pass 2d ago" in text
    (replica,) = [leg for leg in status_json(reports[0])["legs"] if leg["role"] == "replica"]
    assert replica["drill"]["last_passed"] is False
    assert replica["drill"]["critical_after_seconds"] == 8 * DAY
    metrics = render(reports, NOW, "prop", "0")
    labels = '{profile="prop",mirror="m0",leg="b",role="replica"}'
    assert f"remirror_drill_last_passed{labels} 0" in metrics
    assert f"remirror_drill_last_pass_timestamp_seconds{labels} {int(NOW - 2 * DAY)}" in metrics
    assert f"remirror_drill_rto_seconds{labels} 31.5" in metrics


def test_an_unscheduled_leg_without_records_says_nothing_of_drills() -> None:
    (mirror,) = _reports(None, PROFILE)
    assert all(leg.drills is None for leg in mirror.legs)


def test_the_site_reads_its_records_and_skips_one_that_does_not_read() -> None:
    raw = {"drills": {"m0.b": {"last": record(NOW).as_json(), "last_pass": {"kind": "junk"}}}}
    kept = site_facts("b", raw).drills["m0.b"]
    assert kept.last == record(NOW)
    assert kept.last_pass is None


def test_destroy_leaves_site_bs_points_and_a_killed_drills_copies_to_site_b() -> None:
    # Only site B's operator takes its points down (`remirror cdp down --leg` there, which
    # removes a killed drill's copies first): the primary's destroy says so and sends nothing.
    profile = parse_profile(DRILLED)
    sites = Sites(bare_sites())
    facts = sites.run(make_plan(profile, sites.facts, SECRETS))
    volume = "remirror-m0.b-cdp"
    leftovers = {f"{volume}-drill": facts["b"].dm[volume], f"{volume}-drill-data": facts["b"].dm[volume]}
    facts = {**facts, "b": dataclasses.replace(facts["b"], dm={**facts["b"].dm, **leftovers})}
    plan = make_teardown(profile, profile.mirrors[0], facts)
    assert [a for a in plan.actions if a.verb == Verb.DEACTIVATE_POINTS] == []
    (note,) = plan.notes
    assert note.startswith("site b keeps its points of m0 up (/dev/mapper/remirror-m0.b-cdp"), note
    assert "`remirror cdp down PROFILE m0 --leg`" in note


def test_no_request_from_another_site_may_take_down_a_leg_s_points_or_their_copies() -> None:
    from remirror.agent.policy import Refused, check_request
    from remirror.profile.scope import site_scope

    local = parse_profile(
        DRILLED.replace("a: {host: local}", "a: {host: ssh://root@a}").replace(
            "b: {host: ssh://root@b}", "b: {host: local}"
        )
    )
    scope = site_scope([("drill.yaml", local)])
    step = {"kind": "cdp_deactivate", "mirror": "m0.b", "views": ["remirror-m0.b-cdp-drill-data"]}
    for views in ([], ["remirror-m0.b-cdp-drill-data"], ["remirror-m0-cache"]):
        with pytest.raises(Refused, match=r"points of m0\.b are taken down only by this site's operator"):
            check_request({"op": "run", "steps": [{**step, "views": views}]}, scope)


def test_a_replica_is_drilled_and_a_promoted_or_split_site_is_refused() -> None:
    from remirror.drill import DrillRefused, refuse_unless_a_dr_copy
    from remirror.facts.generations import Generation
    from remirror.profile.names import points_volume

    profile = parse_profile(DRILLED)
    mirror = profile.mirrors[0]
    sites = Sites(bare_sites())
    facts = sites.run(make_plan(profile, sites.facts, SECRETS))
    b = facts["b"]
    leg = mirror.replicas[0]
    refuse_unless_a_dr_copy(profile, mirror, leg, b)
    # Its leg's record names site b the primary: a promotion (or a split brain).
    volume = b.disks[points_volume(mirror, "b")]
    assert volume.leg_record is not None
    record = volume.leg_record
    newer = Generation(record.current.n + 1, "b", NOW, "forced")
    promoted = dataclasses.replace(record, generations=(*record.generations, newer))
    split = dataclasses.replace(volume, leg_record=promoted)
    with pytest.raises(DrillRefused, match=r"records it as the primary \(promoted, or a split brain"):
        refuse_unless_a_dr_copy(
            profile, mirror, leg, dataclasses.replace(b, disks={**b.disks, volume.path: split})
        )
    # Another site's array in the same kernel (the lab's) is not this site's; one on its leg is.
    arrays = dataclasses.replace(b, arrays=facts["a"].arrays, array_links=facts["a"].array_links)
    refuse_unless_a_dr_copy(profile, mirror, leg, arrays)
    (array,) = facts["a"].arrays
    own = dataclasses.replace(volume, kernel_name=array.members[0].device)
    running = dataclasses.replace(arrays, disks={**b.disks, volume.path: own})
    with pytest.raises(DrillRefused, match=r"runs m0's array \(promoted\)"):
        refuse_unless_a_dr_copy(profile, mirror, leg, running)


def test_a_check_is_stopped_whole_when_the_pool_fills_and_at_its_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from remirror.agent import hooks
    from remirror.agent.hooks import run_line as run_check

    monkeypatch.setattr(hooks, "WATCH_SECONDS", 0.1)  # the watch's pace; a drill's is a second
    calls = []

    def danger() -> str:
        calls.append(1)
        return "stopped: m0.b's pool is 95% full (rw): the replica's writes need it" if len(calls) > 1 else ""

    # The check's child (sleep) is killed with it: the whole process group goes.
    done = run_check("sleep 30 & echo started; wait", {}, 60, danger)
    assert done.exit_code == -1
    assert done.output.startswith("started\n")
    assert "pool is 95% full" in done.output
    # 1.5 s, not less: the shell must have echoed before the kill even on a loaded machine.
    timed_out = run_check("echo $REMIRROR_DRILL_MOUNT; sleep 30", {"REMIRROR_DRILL_MOUNT": "/run/x"}, 1.5)
    assert (timed_out.exit_code, timed_out.output) == (-1, "/run/x\n\n(killed after 1.5s)")
    assert run_check("exit 4", {}, 60).exit_code == 4
