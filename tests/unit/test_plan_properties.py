"""Properties of the planner over many profiles and site states, on simulated sites.

Idempotence: after the plan for any state has run, the plan is empty.
Convergence never re-creates an array that exists on disk, and never
destroys data. Destroy undoes apply, and a later apply adopts the disks.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Callable

import pytest

from remirror.facts.model import secret_digest
from remirror.facts.site import DiskFacts, SiteFacts
from remirror.plan import Plan, PlanError, make_plan, make_teardown
from remirror.profile import Profile, parse_profile
from tests.unit.simulated_sites import Sites, bare_site, wire

SECRETS = {
    "/etc/remirror/m0.chap": "initiator-secret-1",
    "/etc/remirror/m0.chap.mutual": "target-secret-22",
    "/etc/remirror/chap/prop.m0": "generated-secret-4",
    "/etc/remirror/chap/prop.m0.mutual": "generated-target-5",
    "/etc/remirror/app.chap": "application-secret-3",
}
INITIATORS = {"a": "iqn.2026-11.test:a", "b": "iqn.2026-11.test:b", "c": "iqn.2026-11.test:c"}
DISKS = {"a": ("/dev/a0", "dm-0"), "b": ("/dev/b0", "dm-1"), "c": ("/dev/c0", "dm-2")}
FAST = {"a": ("/dev/a-fast", "dm-10"), "b": ("/dev/b-fast", "dm-11"), "c": ("/dev/c-fast", "dm-12")}
EXPORT_IQN = "iqn.2026-11.test:m0.export"
CDP = "    cdp: {every: 10s, keep: 1h}\n"


def profile_text(
    mode: str, chap: str, replicas: int, export: bool, timeouts: str, cache: str = "none"
) -> str:
    replication = {
        "sync": "{mode: sync, bitmap_chunk: 1MiB}",
        "async": "{mode: async, write_behind: 512, on_link_loss: wait, resync_max: 40MiB}",
    }[mode]
    chap_yaml = {
        "none": "chap: none, ",
        "generated": "",  # Profile.replica_chap: mutual, with secrets apply generates
        "one-way": "chap: {username: m0, password_file: /etc/remirror/m0.chap}, ",
        "mutual": "chap: {username: m0, password_file: /etc/remirror/m0.chap, mutual: true}, ",
    }[chap]

    def cached(site: str) -> str:
        if cache == "none" or (cache.startswith("replica") and site == "a"):
            return ""
        kind = "cache" if cache.endswith("dm-cache") else "writecache"
        return f", cache: {{type: {kind}, disk: {FAST[site][0]}}}"

    legs = "\n".join(
        f"      - {{site: {s}, disk: {DISKS[s][0]}, portal: 192.0.2.{2 + i}:3260{cached(s)}}}"
        for i, s in enumerate(["b", "c"][:replicas])
    )
    export_yaml = (
        f"    export: {{iqn: {EXPORT_IQN}, portal: 192.0.2.1:3260, initiators: [iqn.2026-11.test:app],"
        " chap: {username: app, password_file: /etc/remirror/app.chap}}\n"
        if export
        else ""
    )
    return f"""version: 1
name: prop
sites:
  a: {{host: local}}
  b: {{host: ssh://root@b}}
  c: {{host: ssh://root@c}}
mirrors:
  - name: m0
    primary: {{site: a, disk: /dev/a0{cached("a")}}}
    replicas:
{legs}
    replication: {replication}
    iscsi: {{{chap_yaml}timeouts: {timeouts}}}
{export_yaml}"""


PROFILES = (
    {
        f"{mode}-{chap}-{replicas}r{'-export' if export else ''}-{timeouts}": parse_profile(
            profile_text(mode, chap, replicas, export, timeouts)
        )
        for mode, chap, replicas, export, timeouts in itertools.product(
            ["sync", "async"],
            ["none", "one-way", "mutual", "generated"],
            [1, 2],
            [False, True],
            ["lan", "wan"],
        )
    }
    | {
        f"{mode}-{replicas}r-{cache}": parse_profile(
            profile_text(mode, "mutual", replicas, False, "wan", cache)
        )
        for mode, replicas, cache in itertools.product(
            ["sync", "async"], [1, 2], ["replica-writecache", "both-writecache", "replica-dm-cache"]
        )
    }
    | {
        f"{mode}-cdp{'-export' if export else ''}-{cache}": parse_profile(
            profile_text(mode, "mutual", 1, export, "wan", cache) + CDP
        )
        for mode, export, cache in itertools.product(
            ["sync", "async"], [False, True], ["none", "both-writecache"]
        )
    }
)


def bare_sites() -> dict[str, SiteFacts]:
    return {
        name: bare_site(
            name,
            INITIATORS[name],
            {
                path: DiskFacts(
                    path, True, kernel, size, devno=f"254:{kernel.removeprefix('dm-')}", first_sector="zero"
                )
                for path, kernel, size in [(*DISKS[name], 1 << 30), (*FAST[name], 64 << 20)]
            },
            "/etc/rtslib-fb-target/saveconfig.json",
        )
        for name in ("a", "b", "c")
    }


def converge(profile: Profile, sites: Sites) -> Plan:
    """Plan, run; return the plan that follows (which must be empty)."""
    sites.run(make_plan(profile, sites.facts, SECRETS))
    return make_plan(profile, sites.facts, SECRETS)


def replace_site(facts: dict[str, SiteFacts], name: str, **changes: object) -> dict[str, SiteFacts]:
    return {**facts, name: dataclasses.replace(facts[name], **changes)}  # type: ignore[arg-type]


# What can happen to converged sites; each keeps what is on the disks.
Perturbation = Callable[[dict[str, SiteFacts]], dict[str, SiteFacts]]
PERTURBATIONS: dict[str, Perturbation] = {
    "nothing": lambda f: f,
    "session failed": lambda f: replace_site(
        f, "a", sessions=tuple(dataclasses.replace(s, state="FAILED") for s in f["a"].sessions)
    ),
    "logged out": lambda f: replace_site(f, "a", sessions=()),
    "node records lost": lambda f: replace_site(f, "a", nodes={}, sessions=()),
    "replica LIO cleared": lambda f: replace_site(f, "b", targets={}, backstores={}),
    "ACL secret changed": lambda f: replace_site(
        f,
        "b",
        targets={
            iqn: dataclasses.replace(
                t,
                acls={
                    i: dataclasses.replace(acl, chap_password=secret_digest("stale"))
                    for i, acl in t.acls.items()
                },
            )
            for iqn, t in f["b"].targets.items()
        },
    ),
    "array stopped": lambda f: replace_site(f, "a", arrays=(), array_links={}),
    "backlog changed": lambda f: replace_site(
        f, "a", arrays=tuple(dataclasses.replace(a, backlog=7) for a in f["a"].arrays)
    ),
    # md keeps an array's own resync limit in memory only: an assembly forgets it.
    "resync limit lost": lambda f: replace_site(
        f, "a", arrays=tuple(dataclasses.replace(a, sync_speed_max=None) for a in f["a"].arrays)
    ),
    "resync limit changed": lambda f: replace_site(
        f, "a", arrays=tuple(dataclasses.replace(a, sync_speed_max=1 << 30) for a in f["a"].arrays)
    ),
    # An operator's fast rebuilds: a floor above the limit, which md would then never hold to.
    "resync limit floor raised": lambda f: replace_site(
        f, "a", arrays=tuple(dataclasses.replace(a, sync_speed_min=50 << 20) for a in f["a"].arrays)
    ),
    "bitmap chunk changed": lambda f: replace_site(
        f, "a", arrays=tuple(dataclasses.replace(a, bitmap_chunk=3 << 20) for a in f["a"].arrays)
    ),
    "write-mostly lost": lambda f: replace_site(
        f,
        "a",
        arrays=tuple(
            dataclasses.replace(
                a, members=tuple(dataclasses.replace(m, state=m.state - {"write_mostly"}) for m in a.members)
            )
            for a in f["a"].arrays
        ),
    ),
    # An array an older remirror made (or one assembled on a promoted site): the local leg first.
    "local leg first": lambda f: replace_site(
        f,
        "a",
        arrays=tuple(
            dataclasses.replace(
                a,
                members=tuple(
                    dataclasses.replace(m, slot=i)
                    for i, m in enumerate(sorted(a.members, key=lambda m: "write_mostly" in m.state))
                ),
            )
            for a in f["a"].arrays
        ),
    ),
    # The DR host restored an older saved configuration: LIO's default login parameters.
    "target parameters reset": lambda f: replace_site(
        f, "b", targets={iqn: dataclasses.replace(t, parameters={}) for iqn, t in f["b"].targets.items()}
    ),
    # A session logged in to such a target: writes may overtake each other on the wire.
    "session out of order": lambda f: replace_site(
        f, "a", sessions=tuple(dataclasses.replace(s, initial_r2t=True) for s in f["a"].sessions)
    ),
    "scheduler reset": lambda f: replace_site(
        f, "a", sessions=tuple(dataclasses.replace(s, scheduler="mq-deadline") for s in f["a"].sessions)
    ),
    "writes held": lambda f: replace_site(
        f, "a", arrays=tuple(dataclasses.replace(a, writes_suspended=True) for a in f["a"].arrays)
    ),
    "mdadm.conf lost": lambda f: {n: dataclasses.replace(s, mdadm_conf="") for n, s in f.items()},
    "every site restarted": lambda f: {
        n: dataclasses.replace(s, arrays=(), array_links={}, sessions=(), targets={}, backstores={})
        for n, s in f.items()
    },
}


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_from_bare_disks_one_apply_converges(name: str) -> None:
    sites = Sites(bare_sites())
    assert converge(PROFILES[name], sites).actions == ()


@pytest.mark.parametrize(
    ("name", "what"), list(itertools.product(sorted(PROFILES)[::5], sorted(PERTURBATIONS)))
)
def test_from_any_disturbance_one_apply_converges_without_recreating(name: str, what: str) -> None:
    profile = PROFILES[name]
    sites = Sites(bare_sites())
    converge(profile, sites)
    sites.facts = PERTURBATIONS[what](sites.facts)
    repair = make_plan(profile, sites.facts, SECRETS)
    assert "CreateArray" not in [a.verb for a in repair.actions]
    assert repair.destructive == ()
    # Sync mirrors send nothing behind: the order of their legs, or of their writes on the
    # wire, does not matter to what site B holds.
    sync = profile.mirrors[0].replication.mode == "sync"
    unchanged = what == "nothing" or (what in ("local leg first", "session out of order") and sync)
    # A mirror whose profile sets no limit leaves md's alone, whatever it is.
    unlimited = profile.mirrors[0].replication.resync_max is None
    unchanged = unchanged or (what.startswith("resync limit") and unlimited)
    assert unchanged == repair.is_empty
    assert converge(profile, sites).actions == ()


@pytest.mark.parametrize("name", sorted(PROFILES)[::3])
def test_changing_on_link_loss_keeps_the_sessions_logged_in(name: str) -> None:
    # A logout would fail every remote leg under md: the timeout is written live.
    profile = PROFILES[name]
    sites = Sites(bare_sites())
    converge(profile, sites)
    before = {(s.sid, s.disk) for s in sites.facts["a"].sessions}
    mirror = profile.mirrors[0]
    other = "degrade" if mirror.replication.on_link_loss == "wait" else "wait"
    changed = profile.model_copy(
        update={
            "mirrors": [
                mirror.model_copy(
                    update={"replication": mirror.replication.model_copy(update={"on_link_loss": other})}
                )
            ]
        }
    )
    plan = make_plan(changed, sites.facts, SECRETS)
    assert sorted({a.verb for a in plan.actions}) == ["SetSessionTimeout", "UpdateIscsiNode"]
    assert not any("--logout" in str(step) for a in plan.actions for step in wire(a))
    assert converge(changed, sites).actions == ()
    assert {(s.sid, s.disk) for s in sites.facts["a"].sessions} == before


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_destroy_undoes_apply_and_apply_adopts_the_disks_again(name: str) -> None:
    profile = PROFILES[name]
    mirror = profile.mirrors[0]
    sites = Sites(bare_sites())
    converge(profile, sites)
    teardown = make_teardown(profile, mirror, sites.facts)
    assert {a.symbol for a in teardown.actions} <= {"-", "~"}
    after = sites.run(teardown)
    assert make_teardown(profile, mirror, after).is_empty
    assert (after["a"].arrays, after["a"].sessions, after["a"].nodes) == ((), (), {})
    assert all(not s.targets and not s.backstores for s in after.values())
    # The disks still hold the array: no site may assemble it until apply says so.
    assert "ARRAY /dev/md/m0" not in after["a"].mdadm_conf
    assert all("ARRAY <ignore>" in after[s].mdadm_conf for s in ["a", "b"])
    # The disks kept their superblocks: apply assembles, it does not create. A leg's cache is
    # made again first, alone: its leg is judged through it (planner.caches_to_make_again).
    again = make_plan(profile, after, SECRETS)
    if again.pending:
        assert {a.verb for a in again.actions} <= {"CreateCache", "WriteMdadmConf"}, again.actions
        assert "once its legs' caches are back" in again.pending
        again = make_plan(profile, sites.run(again), SECRETS)
    assert "AssembleArray" in [a.verb for a in again.actions]
    assert "CreateArray" not in [a.verb for a in again.actions]
    assert again.destructive == ()
    assert converge(profile, sites).actions == ()


def in_use(facts: dict[str, SiteFacts], **changes: tuple[str, ...]) -> dict[str, SiteFacts]:
    device = DiskFacts("/dev/md/m0", True, "md127", 1 << 30, **changes)  # type: ignore[arg-type]
    return replace_site(facts, "a", disks={**facts["a"].disks, "/dev/md/m0": device})


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"mounts": ("/srv/files",)}, "mounted on /srv/files"),
        ({"openers": ("pid 4242 (dd)",)}, "open by pid 4242 (dd)"),
        ({"holders": ("dm-7",)}, "held by dm-7"),
    ],
)
def test_destroy_refuses_a_mirror_in_use(changes: dict[str, tuple[str, ...]], words: str) -> None:
    profile = PROFILES["sync-none-1r-lan"]
    sites = Sites(bare_sites())
    converge(profile, sites)
    with pytest.raises(PlanError, match=re.escape(f"site a: /dev/md/m0 is in use ({words})")):
        make_teardown(profile, profile.mirrors[0], in_use(sites.facts, **changes))


def test_destroy_refuses_an_export_with_initiators_logged_in() -> None:
    profile = PROFILES["sync-none-1r-export-lan"]
    sites = Sites(bare_sites())
    converge(profile, sites)
    target = sites.facts["a"].targets[EXPORT_IQN]
    busy = {i: dataclasses.replace(acl, logged_in=True) for i, acl in target.acls.items()}
    facts = replace_site(sites.facts, "a", targets={EXPORT_IQN: dataclasses.replace(target, acls=busy)})
    with pytest.raises(PlanError, match=re.escape("has initiators logged in (iqn.2026-11.test:app)")):
        make_teardown(profile, profile.mirrors[0], facts)


def test_destroy_refuses_while_something_else_exports_the_mirror() -> None:
    profile = PROFILES["sync-none-1r-lan"]
    sites = Sites(bare_sites())
    converge(profile, sites)
    facts = replace_site(sites.facts, "a", backstores={"someone-elses": "/dev/md/m0"})
    with pytest.raises(PlanError, match="exported by LIO backstore someone-elses"):
        make_teardown(profile, profile.mirrors[0], facts)


def test_the_export_is_served_from_the_primary_after_the_array() -> None:
    profile = PROFILES["async-mutual-2r-export-wan"]
    plan = make_plan(profile, bare_sites(), SECRETS)
    lines = [f"{a.site} {a.verb} {a.subject}" for a in plan.actions]
    create = next(i for i, line in enumerate(lines) if "CreateArray" in line)
    export = [line for line in lines[create:] if line.startswith("a ") and "Mdadm" not in line]
    assert export == [
        "a CreateArray /dev/md/m0 RAID1 /dev/a0 + 2 write-mostly leg(s) in the first slot(s), async,"
        " write-behind 512",
        "a CreateBackstore m0-export (block) on /dev/md/m0",
        f"a CreateTarget {EXPORT_IQN} (TPG 1, CHAP on)",
        f"a CreatePortal 192.0.2.1:3260 on {EXPORT_IQN}",
        f"a CreateLun LUN 0 -> m0-export on {EXPORT_IQN}",
        f"a CreateNodeAcl iqn.2026-11.test:app on {EXPORT_IQN}",
        "a SaveLioConfig /etc/rtslib-fb-target/saveconfig.json",
    ]
    acl = next(a for a in plan.actions if a.verb == "CreateNodeAcl" and a.site == "a")
    assert wire(acl)[0]["chap"] == {
        "username": "app",
        "password": "application-secret-3",
        "mutual_username": "",
        "mutual_password": "",
    }
    assert wire(acl)[0]["secrets"] == ["application-secret-3"]


def test_the_export_is_not_served_from_a_mounted_mirror() -> None:
    # Two hosts writing one filesystem corrupts it: the export waits for the unmount.
    profile = PROFILES["sync-none-1r-export-lan"]
    sites = Sites(bare_sites())
    sites.run(make_plan(PROFILES["sync-none-1r-lan"], sites.facts, SECRETS))
    with pytest.raises(PlanError, match="/dev/md/m0 is in use \\(mounted on /srv\\)"):
        make_plan(profile, in_use(sites.facts, mounts=("/srv",)), SECRETS)


def test_an_export_dropped_from_the_profile_is_removed() -> None:
    sites = Sites(bare_sites())
    converge(PROFILES["sync-none-1r-export-lan"], sites)
    without = PROFILES["sync-none-1r-lan"]
    plan = make_plan(without, sites.facts, SECRETS)
    assert [a.line() for a in plan.actions] == [
        f"- a: DeleteTarget {EXPORT_IQN} (its portals, LUNs and ACLs)",
        "- a: DeleteBackstore m0-export on /dev/md/m0 (the disk keeps its data)",
        "~ a: SaveLioConfig /etc/rtslib-fb-target/saveconfig.json",
    ]
    assert converge(without, sites).actions == ()
