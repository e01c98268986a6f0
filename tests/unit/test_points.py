"""A replica's own recovery points (`replicas[].points`, remirror.plan.points, docs/security.md):
planned under the exported volume, out of every other site's reach."""

from __future__ import annotations

import dataclasses
import time

import pytest

from remirror.agent.policy import Refused, check_request
from remirror.errors import ProfileError
from remirror.facts.cdp import stack_names
from remirror.facts.scope import SiteScope
from remirror.plan import make_plan, make_teardown
from remirror.plan.actions import PlanError, Verb
from remirror.plan.promote import make_promotion
from remirror.profile import parse_profile
from remirror.profile.model import Site
from remirror.profile.scope import site_scope
from remirror.retention import Keep
from tests.unit.simulated_sites import Sites, at_site, wire
from tests.unit.test_plan_properties import SECRETS, bare_sites

PROFILE = """\
version: 1
name: prop
sites:
  a: {host: local}
  b: {host: ssh://root@b}
mirrors:
  - name: m0
    primary: {site: a, disk: /dev/a0}
    replicas:
      - {site: b, disk: /dev/b0, portal: 192.0.2.2:3260, points: {every: 1h, keep: 7d}}
    replication: {mode: async, bitmap_chunk: 1MiB}
"""
VOLUME = "/dev/mapper/remirror-m0.b-cdp"


def test_the_replica_exports_the_volume_over_its_own_points_and_the_plan_converges() -> None:
    profile = parse_profile(PROFILE)
    sites = Sites(bare_sites())
    plan = make_plan(profile, sites.facts, SECRETS)
    verbs = [(a.site, a.verb) for a in plan.actions]
    assert verbs.index(("b", Verb.CREATE_POINTS)) < verbs.index(("b", Verb.CREATE_BACKSTORE))
    (points,) = [a for a in plan.actions if a.verb == Verb.CREATE_POINTS]
    assert wire(points)[0] | {"kind": "cdp_stack"} == {
        "kind": "cdp_stack", "mirror": "m0.b", "md": "/dev/b0", "chunk": 65536, "history": 25,
        "fresh": False, "allow_data": False,
    }  # fmt: skip
    assert not points.destructive  # a blank disk
    (backstore,) = [a for a in plan.actions if a.verb == Verb.CREATE_BACKSTORE]
    assert wire(backstore)[0]["dev"] == VOLUME
    # The array is sized by the volume (the disk less the points' metadata and history).
    (create,) = [a for a in plan.actions if a.verb == Verb.CREATE_ARRAY]
    size = next(a for a in at_site(create)[0]["argv"] if a.startswith("--size="))
    assert int(size.removeprefix("--size=").removesuffix("M")) < (1 << 30) * 3 // 4 // (1 << 20)
    sites.run(plan)
    assert make_plan(profile, sites.facts, SECRETS).actions == ()


def test_points_on_the_disk_are_activated_first_and_the_rest_waits_for_what_the_volume_holds() -> None:
    profile = parse_profile(PROFILE)
    facts = bare_sites()
    b = facts["b"]
    facts["b"] = dataclasses.replace(
        b, disks={**b.disks, "/dev/b0": dataclasses.replace(b.disks["/dev/b0"], first_sector="cdp")}
    )
    plan = make_plan(profile, facts, SECRETS)
    mirror = [(a.site, a.verb) for a in plan.actions if a.verb != Verb.WRITE_MDADM_CONF]
    assert mirror == [("b", Verb.ACTIVATE_POINTS)]
    assert "the rest of m0 once its sites' points volumes are active" in plan.pending


@pytest.mark.parametrize("head", ["other", ""])
def test_a_disk_with_data_but_no_signature_is_destructive_to_lay_points_on(head: str) -> None:
    # blkid finds nothing, but the first sector is not zeros (or was not read): it is data.
    profile = parse_profile(PROFILE)
    facts = bare_sites()
    b = facts["b"]
    facts["b"] = dataclasses.replace(
        b, disks={**b.disks, "/dev/b0": dataclasses.replace(b.disks["/dev/b0"], first_sector=head)}
    )
    # From the primary: only site B's operator lays its points over data (the policy refuses it).
    with pytest.raises(PlanError, match=r"only site b's operator lays points over data: clear /dev/b0 there"):
        make_plan(profile, facts, SECRETS)
    # At site B itself, its operator's apply (--allow-destructive) lays them.
    at_b = profile.model_copy(update={"sites": {"a": Site(host="ssh://root@a"), "b": Site(host="local")}})
    (points,) = [a for a in make_plan(at_b, facts, SECRETS).actions if a.verb == Verb.CREATE_POINTS]
    assert points.destructive == "site b: /dev/b0 holds data where the points' metadata goes"
    assert wire(points)[0]["allow_data"] is True


def test_destroy_leaves_another_sites_points_up_and_takes_down_its_own_after_their_export() -> None:
    profile = parse_profile(PROFILE)
    sites = Sites(bare_sites())
    sites.run(make_plan(profile, sites.facts, SECRETS))
    plan = make_teardown(profile, profile.mirrors[0], sites.facts)
    assert Verb.DEACTIVATE_POINTS not in [a.verb for a in plan.actions]
    assert ("b", Verb.DELETE_BACKSTORE) in [(a.site, a.verb) for a in plan.actions]  # the export goes
    assert plan.notes == (
        "site b keeps its points of m0 up (/dev/mapper/remirror-m0.b-cdp on /dev/b0): only its"
        " operator takes them down there, with `remirror cdp down PROFILE m0 --leg`",
    )
    # Where the points are this host's own (the mirror destroyed at site B, after a promotion).
    at_b = profile.model_copy(update={"sites": {"a": Site(host="ssh://root@a"), "b": Site(host="local")}})
    plan = make_teardown(at_b, at_b.mirrors[0], sites.facts)
    verbs = [(a.site, a.verb) for a in plan.actions]
    assert verbs.index(("b", Verb.DELETE_BACKSTORE)) < verbs.index(("b", Verb.DEACTIVATE_POINTS))
    (down,) = [a for a in plan.actions if a.verb == Verb.DEACTIVATE_POINTS]
    assert "its points and data stay on /dev/b0" in down.subject
    assert plan.notes == ()


def test_a_forced_promotion_at_a_restarted_site_activates_its_points_first_then_reads_the_leg() -> None:
    # After a restart of site B its stack is not active: md's superblock and the leg record lie in
    # the volume, so the promotion waits for the activation (the rest is planned once it has run).
    profile = parse_profile(
        PROFILE.replace("{site: a, disk: /dev/a0}", "{site: a, disk: /dev/a0, portal: 192.0.2.1}")
    )
    sites = Sites(bare_sites())
    sites.run(make_plan(profile, sites.facts, SECRETS))
    b = sites.facts["b"]
    assert b.disks[VOLUME].leg_record is not None
    stack = set(stack_names("m0.b").values())
    restarted = dataclasses.replace(
        b,
        dm={n: d for n, d in b.dm.items() if n not in stack},
        disks={p: d for p, d in b.disks.items() if p != VOLUME},
    )
    plan = make_promotion(profile, "m0", "b", {"a": None, "b": restarted}, SECRETS, force=True)
    assert [(a.site, a.verb) for a in plan.actions] == [("b", Verb.ACTIVATE_POINTS)]
    assert {k: wire(plan.actions[0])[0][k] for k in ("mirror", "md", "fresh", "allow_data")} == {
        "mirror": "m0.b", "md": "/dev/b0", "fresh": False, "allow_data": False,
    }  # fmt: skip
    assert plan.pending == "the promotion of m0 to b, once its leg can be read"
    # A planned promotion needs the leg in sync: the primary's apply brings it back first.
    with pytest.raises(PlanError, match="`remirror apply` brings them back with the leg"):
        make_promotion(profile, "m0", "b", {**sites.facts, "b": restarted}, SECRETS, force=False)
    # Active again (what the activation brings back): the forced promotion, its record in the volume.
    plan = make_promotion(profile, "m0", "b", {"a": None, "b": b}, SECRETS, force=True)
    assert not plan.pending
    (record,) = [a for a in plan.actions if a.verb == Verb.RECORD_GENERATION]
    assert (record.site, wire(record)[0]["devices"]) == ("b", [VOLUME])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("primary: {site: a, disk: /dev/a0, points: {every: 1h, keep: 1d}}", "points are a replica's"),
        (
            "primary: {site: a, disk: /dev/a0, keep_data: true}",
            "cannot go with keep_data",
        ),
    ],
)
def test_points_where_they_cannot_go_are_refused(change: str, message: str) -> None:
    with pytest.raises(ProfileError, match=message):
        parse_profile(PROFILE.replace("primary: {site: a, disk: /dev/a0}", change))


def test_points_with_a_cache_on_the_same_leg_are_refused() -> None:
    text = PROFILE.replace("points: {every: 1h", "cache: {disk: /dev/b-fast}, points: {every: 1h")
    with pytest.raises(ProfileError, match="cannot go with a cache"):
        parse_profile(text)


# --- no other site reaches them (remirror.agent.policy) ----------------------------------------


def _site_b_scope() -> SiteScope:
    profile = parse_profile(PROFILE)
    sites = {"a": Site(host="ssh://root@a"), "b": Site(host="local")}
    return site_scope([("/etc/remirror/prop.yaml", profile.model_copy(update={"sites": sites}))])


def test_the_site_scope_has_the_volume_not_the_disk_under_the_points() -> None:
    scope = _site_b_scope()
    assert VOLUME in scope.disks
    assert "/dev/b0" not in scope.disks
    assert scope.points == {("m0.b", "/dev/b0")}


STACK = {"kind": "cdp_stack", "mirror": "m0.b", "md": "/dev/b0", "chunk": 65536, "history": 25}


@pytest.mark.parametrize(
    "request_",
    [
        {"op": "cdp", "do": "point", "mirror": "m0.b", "md": "/dev/b0", "every": 1, "keep": 0},
        {"op": "cdp", "do": "list", "mirror": "m0.b", "md": "/dev/b0"},
        {"op": "run", "steps": [{"kind": "dm_remove", "name": "remirror-m0.b-cdp-pool"}]},
        {"op": "run", "steps": [{"kind": "zero_head", "device": "/dev/b0"}]},
        {"op": "run", "steps": [{"kind": "md_zero_superblock", "device": "/dev/b0"}]},
        {"op": "run", "steps": [{**STACK, "md": "/dev/b1", "fresh": True, "allow_data": True}]},
        {"op": "run", "steps": [{**STACK, "fresh": True, "allow_data": False}]},  # laid fresh
        {"op": "run", "steps": [{**STACK, "fresh": False, "allow_data": True}]},  # over data
        {"op": "run", "steps": [STACK]},  # neither said: not taken as "no"
        {"op": "run", "steps": [{"kind": "cdp_deactivate", "mirror": "m0.b", "views": []}]},
        {
            "op": "run",
            "steps": [{"kind": "cdp_deactivate", "mirror": "m0.b", "views": ["remirror-m0-cdp-at-1"]}],
        },
        {"op": "cdp", "do": "down", "mirror": "m0.b", "md": "/dev/b0"},
        {"op": "cdp", "do": "up", "mirror": "m0.b", "md": "/dev/b0"},
        {
            "op": "run",
            "steps": [
                {
                    "kind": "dm_reload",
                    "name": "remirror-m0.b-cdp-pool",
                    "table": {"target": "linear", "sectors": 8, "devices": ["/dev/b1"]},
                }
            ],
        },
    ],
)
def test_no_request_from_another_site_reaches_the_points(request_: dict[str, object]) -> None:
    with pytest.raises(Refused):
        check_request(request_, _site_b_scope())


@pytest.mark.parametrize(
    "step",
    [
        {"kind": "cdp_deactivate", "mirror": "m0.b", "views": []},
        {**STACK, "fresh": True, "allow_data": False},
        {**STACK, "fresh": False, "allow_data": True},
    ],
)
def test_a_site_without_profiles_takes_no_legs_points_down_nor_lays_them_fresh(
    step: dict[str, object],
) -> None:
    with pytest.raises(Refused, match="only by this site's operator"):
        check_request({"op": "run", "steps": [step]}, None)


def test_the_planner_may_build_them_on_a_blank_disk_activate_and_read_them() -> None:
    scope = _site_b_scope()
    check_request({"op": "run", "steps": [{**STACK, "fresh": False, "allow_data": False}]}, scope)
    check_request({"op": "observe", "disks": ["/dev/b0", VOLUME], "probe": ["/dev/b0"]}, scope)
    check_request(
        {"op": "run", "steps": [{"kind": "lio_create_backstore", "name": "m0-b", "dev": VOLUME}]},
        scope,
    )


# --- a full pool: the replica's writes fail, its points stay -----------------------------------


def test_a_legs_pool_refuses_writes_when_full_where_a_mirrors_queues_them() -> None:
    from remirror.facts.cdp import layout, tables

    plan = layout(2 << 21, 64 * 1024, 25)
    assert tables("m0.b", "/dev/b0", plan)["pool"].endswith(" 1 error_if_no_space")
    assert tables("m0", "/dev/md/m0", plan)["pool"].endswith(" 0")


def test_a_legs_points_are_pruned_by_age_only_never_early_for_space(monkeypatch: pytest.MonkeyPatch) -> None:
    from remirror.agent import cdp as local
    from remirror.agent import cdp_requests
    from remirror.facts.cdp import RecoveryPoint, ThinPoolStatus, layout
    from remirror.facts.cdp_index import CdpIndex

    full = ThinPoolStatus(1, 10, 100, 99, 100, "rw")
    monkeypatch.setattr(local, "pool_status", lambda name: full)
    dropped: list[int] = []
    monkeypatch.setattr(
        local, "delete_points", lambda name, md, index, doomed: dropped.extend(p.id for p in doomed)
    )
    now = time.time()
    index = CdpIndex(
        "x", layout(2 << 21, 64 * 1024, 25), (RecoveryPoint(1, now - 60, 1), RecoveryPoint(2, now, 2)), 3
    )
    assert (
        cdp_requests.point_and_prune(
            "m0.b", "/dev/b0", dataclasses.replace(index, mirror="m0.b"), 3600, Keep(86400), False
        )["for_space"]
        == []
    )
    assert dropped == []
    assert cdp_requests.point_and_prune("m0", "/dev/md/m0", index, 3600, Keep(86400), False)["for_space"] == [
        1
    ]


# --- status and check show them ----------------------------------------------------------------


def test_check_warns_when_the_replicas_own_points_are_overdue_and_status_shows_them() -> None:
    from remirror.facts.cdp_index import CdpPoints
    from remirror.health.check import DEFAULT_CRITICAL, DEFAULT_WARNING, Status, judge
    from remirror.health.report import report
    from remirror.health.seen import Seen

    profile = parse_profile(PROFILE)
    sites = Sites(bare_sites())
    facts = sites.run(make_plan(profile, sites.facts, SECRETS))
    now = time.time()
    b = facts["b"]
    old = dataclasses.replace(b.disks["/dev/b0"], cdp_points=CdpPoints(3, now - 5 * 86400, now - 2 * 86400))
    facts = {**facts, "b": dataclasses.replace(b, disks={**b.disks, "/dev/b0": old})}
    (mirror,) = report(profile, facts, Seen({}), now)
    (replica,) = [leg for leg in mirror.legs if leg.site == "b"]
    assert replica.points is not None
    assert (replica.points.points, replica.points.overdue) == (3, True)
    verdict = judge([mirror], DEFAULT_WARNING, DEFAULT_CRITICAL)
    assert verdict.status == Status.WARNING
    assert "b's own points: newest point 2d old, every 1h" in verdict.text


@pytest.mark.parametrize(
    "request_",
    [
        {"op": "run", "steps": [{"kind": "dm_remove", "name": "remirror-m0.b-cdp"}]},
        {
            "op": "run",
            "steps": [
                {
                    "kind": "dm_create",
                    "name": "remirror-m0.b-cdp-tmeta",
                    "table": {"target": "linear", "sectors": 8, "devices": ["/dev/sdx"]},
                }
            ],
        },
        {
            "op": "run",
            "steps": [
                {
                    "kind": "dm_reload",
                    "name": "remirror-m0.b-cdp",
                    "table": {"target": "linear", "sectors": 8, "devices": ["/dev/sdx"]},
                }
            ],
        },
        {"op": "cdp", "do": "point", "mirror": "m0.b", "md": "/dev/b0", "every": 1, "keep": 0},
    ],
)
def test_a_site_without_profiles_gives_no_request_its_legs_points_devices(
    request_: dict[str, object],
) -> None:
    # Its raw disks are any request's (docs/security.md, "A site with no profile"); the names of
    # a leg's own points (MIRROR.SITE: no profile name has a dot) are no request's.
    with pytest.raises(Refused, match="own points"):
        check_request(request_, None)
