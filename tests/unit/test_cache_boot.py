"""A leg behind a cache after a boot (plan/planner.py caches_to_make_again, plan/start.py): the
cache is made again first, adopting its superblock, and the legs are judged through it."""

from __future__ import annotations

import dataclasses

import pytest

from remirror.facts.site import SiteFacts
from remirror.plan import make_plan
from remirror.plan.actions import Plan, SplitBrain, Verb
from remirror.plan.start import HELD, make_start
from remirror.profile import parse_profile
from tests.unit.simulated_sites import Sites
from tests.unit.test_cache import EXT4
from tests.unit.test_plan_properties import SECRETS, bare_sites, profile_text

CACHED = parse_profile(
    profile_text("sync", "mutual", 1, False, "wan").replace(
        "disk: /dev/a0}", "disk: /dev/a0, cache: {disk: /dev/a-fast}}"
    )
)
CACHE_DEVICE = "/dev/mapper/remirror-m0-a"


def booted(sites: Sites, stale_by: int = 0) -> dict[str, SiteFacts]:
    """The cached primary after a power cut: no dm device, no array, no session; its fast disk
    holds the writecache's superblock, and the bare disk (in an inactive md127, as Debian's
    early boot leaves it) an md superblock `stale_by` events older than the leg's, the rest
    being in the cache (md's flushes commit to the cache, not to the disk)."""
    a = sites.facts["a"]
    disks = {path: disk for path, disk in a.disks.items() if path != CACHE_DEVICE}
    bare = disks["/dev/a0"]
    assert bare.superblock is not None
    stale = dataclasses.replace(bare.superblock, events=bare.superblock.events - stale_by)
    disks["/dev/a0"] = dataclasses.replace(bare, holders=("md127",), superblock=stale)
    disks["/dev/a-fast"] = dataclasses.replace(disks["/dev/a-fast"], first_sector="writecache", holders=())
    a = dataclasses.replace(
        a, dm={}, arrays=(), sessions=(), disks=disks, inactive_arrays={"md127": ("vdb",)}
    )
    return {**sites.facts, "a": a}


def converged() -> Sites:
    sites = Sites(bare_sites())
    sites.run(make_plan(CACHED, sites.facts, SECRETS))
    assert make_plan(CACHED, sites.facts, SECRETS).is_empty
    return sites


def test_after_a_boot_the_cache_is_made_again_alone_and_the_legs_judged_through_it() -> None:
    sites = converged()
    events = sites.facts["a"].disks[CACHE_DEVICE].superblock.events  # type: ignore[union-attr]
    sites.facts = booted(sites, stale_by=3)
    # The bare disk's superblock is older than the replica's: judged from it, the replica would
    # seem to have run without the primary (a split brain that never was).
    first = make_plan(CACHED, sites.facts, SECRETS)
    assert [(a.site, a.verb) for a in first.actions] == [("a", Verb.STOP_ARRAY), ("a", Verb.CREATE_CACHE)]
    assert "the rest of m0 once its legs' caches are back" in first.pending
    assert not first.actions[1].destructive  # the fast disk's superblock is adopted
    sites.run(Plan(first.actions[1:]))  # the cache; md127 stopped as `mdadm --stop` would:
    a = sites.facts["a"]
    bare = dataclasses.replace(a.disks["/dev/a0"], holders=())
    sites.facts["a"] = dataclasses.replace(a, inactive_arrays={}, disks={**a.disks, "/dev/a0": bare})
    # Through the cache the leg shows its own superblock, with every event.
    cached = sites.facts["a"].disks[CACHE_DEVICE]
    assert cached.superblock is not None
    sites.facts["a"] = dataclasses.replace(
        sites.facts["a"],
        disks={
            **sites.facts["a"].disks,
            CACHE_DEVICE: dataclasses.replace(
                cached, superblock=dataclasses.replace(cached.superblock, events=events)
            ),
        },
    )
    second = make_plan(CACHED, sites.facts, SECRETS)
    assemble = next(a for a in second.actions if a.verb == Verb.ASSEMBLE_ARRAY)
    assert CACHE_DEVICE in assemble.subject, assemble.subject
    assert "/dev/a0 " not in assemble.subject + " ", assemble.subject


def test_without_the_cache_made_first_the_stale_disk_would_be_judged_a_split_brain() -> None:
    # What the judgement makes of the bare disk alone (why the cache comes first).
    sites = converged()
    facts = booted(sites, stale_by=3)
    a = facts["a"]
    fake = {**a.disks, CACHE_DEVICE: dataclasses.replace(a.disks["/dev/a0"], path=CACHE_DEVICE, holders=())}
    from remirror.roles import ran_without_primary

    facts = {**facts, "a": dataclasses.replace(a, disks=fake)}
    assert "ran without the primary" in ran_without_primary(CACHED, CACHED.mirrors[0], facts)
    with pytest.raises(SplitBrain):
        make_plan(
            CACHED, {**facts, "a": dataclasses.replace(facts["a"], dm=converged().facts["a"].dm)}, SECRETS
        )


def test_start_makes_a_writecache_again_over_its_own_superblock_and_never_over_a_blank_fast_disk() -> None:
    sites = converged()
    facts = booted(sites)
    started = make_start(CACHED, facts, SECRETS)
    assert [a.verb for a in started.actions] == [Verb.STOP_ARRAY, Verb.CREATE_CACHE], started.notes
    assert started.pending
    assert started.notes == ()
    # A blank fast disk: an empty cache in front of a disk that lacks what the lost one held.
    blank = {
        **facts["a"].disks,
        "/dev/a-fast": dataclasses.replace(facts["a"].disks["/dev/a-fast"], first_sector="zero"),
    }
    held = make_start(CACHED, {**facts, "a": dataclasses.replace(facts["a"], disks=blank)}, SECRETS)
    assert held.actions == ()
    assert held.notes[0].startswith(f"{HELD}: m0: starting it would also take `+ a: CreateCache"), held.notes


def test_a_leg_whose_superblock_never_left_the_cache_has_its_cache_made_first_too() -> None:
    # writecache writes back only above its watermark: the disk under it may hold nothing yet.
    sites = converged()
    facts = booted(sites)
    a = facts["a"]
    blank = dataclasses.replace(
        a.disks["/dev/a0"], superblock=None, leg_record=None, holders=(), signatures=()
    )
    facts = {**facts, "a": dataclasses.replace(a, disks={**a.disks, "/dev/a0": blank}, inactive_arrays={})}
    first = make_plan(CACHED, facts, SECRETS)
    assert [(a.site, a.verb) for a in first.actions] == [("a", Verb.CREATE_CACHE)], first.actions
    assert "once its legs' caches are back" in first.pending
    # A disk that holds something else is no such leg: the whole plan judges what it writes.
    data = dataclasses.replace(blank, signatures=(EXT4,))
    facts = {**facts, "a": dataclasses.replace(facts["a"], disks={**facts["a"].disks, "/dev/a0": data})}
    assert "once its legs' caches are back" not in make_plan(CACHED, facts, SECRETS).pending


def test_an_array_boot_started_under_another_name_waits_for_the_pass_that_assembles() -> None:
    # Both sites rebooted: the primary's own leg started by early boot as md127 (/dev/md/m0_0),
    # and the DR site's cache to make again. That pass makes no cache at the primary, so it
    # does not stop md127 there (start would hold it: a stop without an assembly).
    from remirror.plan.start import make_start
    from tests.unit.test_cache import WRITECACHE
    from tests.unit.test_cache import converged as converged_at

    sites = converged_at(WRITECACHE)
    a, b = sites.facts["a"], sites.facts["b"]
    (array,) = a.arrays
    misnamed = dataclasses.replace(array, array_state="read-auto", degraded=1)
    a = dataclasses.replace(a, arrays=(misnamed,), array_links={"md127": ("m0_0",)}, sessions=())
    disks = {p: d for p, d in b.disks.items() if p != "/dev/mapper/remirror-m0-b"}
    disks["/dev/b-fast"] = dataclasses.replace(disks["/dev/b-fast"], first_sector="writecache", holders=())
    b = dataclasses.replace(b, dm={}, targets={}, backstores={}, disks=disks)
    facts = {**sites.facts, "a": a, "b": b}
    first = make_plan(WRITECACHE, facts, SECRETS)
    assert [(x.site, x.verb) for x in first.actions] == [("b", Verb.CREATE_CACHE)], first.actions
    started = make_start(WRITECACHE, facts, SECRETS)
    assert started.notes == (), started.notes
