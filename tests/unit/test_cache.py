"""Caches in front of legs: the profile's settings, the tables built, the planner's rules, destage."""

from __future__ import annotations

import dataclasses
import re

import pytest

from remirror.daemons.destage import Quiet, local_caches
from remirror.errors import ProfileError
from remirror.facts.dm import parse_dm_table
from remirror.facts.model import CacheStatus, Signature
from remirror.facts.parsers import parse_block_stat
from remirror.facts.site import DiskFacts, DmDevice, SiteFacts
from remirror.plan import PlanError, make_plan, make_teardown
from remirror.plan.cache import writecache_table
from remirror.profile import Profile, parse_profile
from remirror.protocol import decode
from remirror.protocol.steps import DrainCache
from tests.unit.simulated_sites import Sites, at_site, wire
from tests.unit.test_plan_properties import SECRETS, bare_sites, profile_text

EXT4 = Signature("ext4", 0x438, "bebbbe10-27ae-439b-8c3f-662cb952909d", "data")


def with_cache(cache: str) -> Profile:
    """The property tests' one-replica profile, with `cache` as the replica leg's cache mapping."""
    text = profile_text("sync", "mutual", 1, False, "wan")
    text = text.replace("portal: 192.0.2.2:3260}", f"portal: 192.0.2.2:3260, cache: {cache}}}")
    return parse_profile(text)


WRITECACHE = with_cache("{disk: /dev/b-fast}")


def replace_disk(
    facts: dict[str, SiteFacts], site: str, path: str, **changes: object
) -> dict[str, SiteFacts]:
    disks = dict(facts[site].disks)
    disks[path] = dataclasses.replace(disks[path], **changes)  # type: ignore[arg-type]
    return {**facts, site: dataclasses.replace(facts[site], disks=disks)}


def converged(profile: Profile) -> Sites:
    sites = Sites(bare_sites())
    sites.run(make_plan(profile, sites.facts, SECRETS))
    assert make_plan(profile, sites.facts, SECRETS).is_empty
    return sites


# --- the profile ---------------------------------------------------------------------------------


def test_defaults_are_the_kernels_and_a_page_sized_block() -> None:
    cache = WRITECACHE.mirrors[0].replicas[0].cache
    assert cache is not None
    assert (cache.type, cache.effective_block_size, cache.high_watermark, cache.low_watermark) == (
        "writecache",
        4096,
        50,
        45,
    )
    assert cache.destage == "watermark"


@pytest.mark.parametrize(
    ("cache", "words"),
    [
        ("{disk: /dev/b-fast, low_watermark: 60}", "low_watermark (60) must be below high_watermark (50)"),
        ("{disk: /dev/b-fast, block_size: 8KiB}", "a writecache block is a power of two from 512 to 4096"),
        ("{type: cache, disk: /dev/b-fast, max_age: 10s}", "max_age: only for type writecache"),
        ("{type: cache, disk: /dev/b-fast, block_size: 48KiB}", "dm-cache blocks are a multiple of 32KiB"),
        ("{type: cache, disk: /dev/b-fast, destage: idle}", "destage: idle needs type writecache"),
        ("{disk: /dev/b-fast, high_watermark: 101}", "less than or equal to 100"),
    ],
)
def test_settings_that_cannot_work_are_refused_at_their_line(cache: str, words: str) -> None:
    with pytest.raises(ProfileError, match=re.escape(words)) as refused:
        with_cache(cache)
    assert refused.value.one_line().startswith("<profile>:11:")  # the replica's line in profile_text


def test_the_writecache_table_carries_the_tunables_in_kernel_units() -> None:
    cache = with_cache("{disk: /dev/b-fast, writeback_jobs: 64, autocommit_time: 500ms, max_age: 30s}")
    options = cache.mirrors[0].replicas[0].cache
    assert options is not None
    table = writecache_table(524288, "/dev/b0", "/dev/b-fast", options).text()
    assert table == (
        "0 524288 writecache s /dev/b0 /dev/b-fast 4096 10 high_watermark 50 low_watermark 45"
        " writeback_jobs 64 autocommit_time 500 max_age 30000"
    )
    parsed = parse_dm_table(table)
    assert parsed.options["max_age"] == "30000"
    assert parsed.devices == ("/dev/b0", "/dev/b-fast")


# --- the planner -----------------------------------------------------------------------------------


def test_the_replica_exports_its_cache_device_built_before_the_backstore() -> None:
    plan = make_plan(WRITECACHE, bare_sites(), SECRETS)
    verbs = [a.verb for a in plan.actions if a.site == "b"]
    assert verbs[:2] == ["CreateCache", "CreateBackstore"]
    backstore = next(a for a in plan.actions if a.verb == "CreateBackstore")
    assert wire(backstore)[0]["dev"] == "/dev/mapper/remirror-m0-b"
    create = next(a for a in plan.actions if a.verb == "CreateCache")
    assert at_site(create)[0]["argv"][:3] == ["dmsetup", "create", "remirror-m0-b"]
    assert not create.destructive


def test_a_fast_disk_holding_data_is_only_written_over_as_a_destructive_change() -> None:
    facts = replace_disk(bare_sites(), "b", "/dev/b-fast", first_sector="other", signatures=(EXT4,))
    create = next(a for a in make_plan(WRITECACHE, facts, SECRETS).actions if a.verb == "CreateCache")
    assert create.destructive == "site b: cache disk /dev/b-fast holds ext4 filesystem labelled 'data'" + (
        " (UUID bebbbe10-27ae-439b-8c3f-662cb952909d)"
    )
    assert at_site(create)[0]["argv"][0] == "dd"


def test_a_writecache_superblock_on_the_fast_disk_is_kept_its_writes_are_not_on_the_disk_yet() -> None:
    facts = replace_disk(bare_sites(), "b", "/dev/b-fast", first_sector="writecache")
    create = next(a for a in make_plan(WRITECACHE, facts, SECRETS).actions if a.verb == "CreateCache")
    assert not create.destructive
    assert [s["argv"][0] for s in at_site(create) if s["kind"] == "run"] == ["dmsetup"]


def test_a_missing_fast_disk_is_named_with_its_profile_line() -> None:
    facts = replace_disk(bare_sites(), "b", "/dev/b-fast", exists=False)
    with pytest.raises(PlanError, match=r"<profile>:11:\d+: site b: cache disk /dev/b-fast does not exist"):
        make_plan(WRITECACHE, facts, SECRETS)


def test_no_cache_is_slid_under_a_disk_already_exported_without_one() -> None:
    plain = parse_profile(profile_text("sync", "mutual", 1, False, "wan"))
    sites = converged(plain)
    with pytest.raises(PlanError, match="/dev/b0 is exported without a cache"):
        make_plan(WRITECACHE, sites.facts, SECRETS)


def test_new_tunables_are_reloaded_live_and_a_block_size_change_is_refused() -> None:
    sites = converged(WRITECACHE)
    retuned = with_cache("{disk: /dev/b-fast, high_watermark: 80, low_watermark: 70}")
    (tune,) = make_plan(retuned, sites.facts, SECRETS).actions
    assert (tune.verb, tune.symbol) == ("TuneCache", "~")
    assert "high_watermark 50 -> 80" in tune.subject
    assert wire(tune)[0]["kind"] == "dm_reload"
    sites.run(make_plan(retuned, sites.facts, SECRETS))
    assert make_plan(retuned, sites.facts, SECRETS).is_empty
    # Every change named, each once: one raised back, one dropped to the kernel's default.
    aged = with_cache("{disk: /dev/b-fast, high_watermark: 80, low_watermark: 70, max_age: 10s}")
    sites.run(make_plan(aged, sites.facts, SECRETS))
    (back,) = make_plan(retuned, sites.facts, SECRETS).actions
    assert back.subject.endswith(": max_age 10000 -> default, live"), back.subject
    (both,) = make_plan(with_cache("{disk: /dev/b-fast, high_watermark: 60}"), sites.facts, SECRETS).actions
    assert both.subject == (
        "remirror-m0-b: high_watermark 80 -> 60, low_watermark 70 -> 45, max_age 10000 -> default, live"
    )
    with pytest.raises(PlanError, match="a block size cannot change live"):
        make_plan(with_cache("{disk: /dev/b-fast, block_size: 512}"), sites.facts, SECRETS)


def test_another_cache_type_or_fast_disk_is_refused_until_the_cache_is_removed() -> None:
    sites = converged(WRITECACHE)
    with pytest.raises(PlanError, match="is a writecache cache, the profile asks for cache"):
        make_plan(with_cache("{type: cache, disk: /dev/b-fast}"), sites.facts, SECRETS)


def test_a_cache_dropped_from_the_profile_is_drained_then_swapped_for_linear_never_removed() -> None:
    sites = converged(WRITECACHE)
    plain = parse_profile(profile_text("sync", "mutual", 1, False, "wan"))
    plan = make_plan(plain, sites.facts, SECRETS)
    (drain,) = plan.actions
    assert (drain.verb, wire(drain)[0]["kind"]) == ("DrainCache", "drain_cache")
    step = decode(wire(drain)[0])
    assert isinstance(step, DrainCache)
    assert step.cleaner_table is not None
    assert step.linear.text().split()[2:] == ["linear", "254:1", "0"]
    # Cleaner mode by a reload of the device's own table, so that the table shows it.
    assert step.cleaner_table.text().split()[2:] == [
        *("writecache", "s", "254:1", "254:11", "4096", "5"),
        *("high_watermark", "50", "low_watermark", "45", "cleaner"),
    ]
    # The backstore stays on the (now linear) device: nothing is pulled from under LIO.
    after = sites.run(plan)
    assert after["b"].backstores["m0-b"] == "/dev/mapper/remirror-m0-b"
    assert make_plan(plain, after, SECRETS).is_empty
    # And back: a writecache over the linear mapping, live.
    (add,) = make_plan(WRITECACHE, after, SECRETS).actions
    assert add.verb == "AddCache"


def test_destroy_drains_each_cache_before_removing_it() -> None:
    sites = converged(WRITECACHE)
    dirty = dataclasses.replace(sites.facts["b"].dm["remirror-m0-b"], cache=CacheStatus(1000, 17, 3))
    sites.facts["b"] = dataclasses.replace(sites.facts["b"], dm={"remirror-m0-b": dirty})
    verbs: list[tuple[str, str]] = [
        (a.site, a.verb) for a in make_teardown(WRITECACHE, WRITECACHE.mirrors[0], sites.facts).actions
    ]
    assert verbs.index(("b", "DrainCache")) + 1 == verbs.index(("b", "RemoveCacheDevice"))
    assert verbs.index(("b", "DeleteBackstore")) < verbs.index(("b", "DrainCache"))


def test_a_cache_remirror_cannot_read_is_left_alone() -> None:
    sites = converged(WRITECACHE)
    odd = DmDevice("remirror-m0-b", "dm-101", None, None)
    sites.facts["b"] = dataclasses.replace(sites.facts["b"], dm={"remirror-m0-b": odd})
    with pytest.raises(PlanError, match="not a device remirror can read: left alone"):
        make_plan(WRITECACHE, sites.facts, SECRETS)


def test_the_primary_leg_with_a_cache_is_the_md_member() -> None:
    text = profile_text("sync", "mutual", 1, False, "wan").replace(
        "disk: /dev/a0}", "disk: /dev/a0, cache: {disk: /dev/a-fast}}"
    )
    plan = make_plan(parse_profile(text), bare_sites(), SECRETS)
    create = next(a for a in plan.actions if a.verb == "CreateArray")
    assert "/dev/mapper/remirror-m0-a" in at_site(create)[0]["argv"]
    assert "/dev/a0" not in at_site(create)[0]["argv"]


# --- destage when idle -------------------------------------------------------------------------


def test_destage_is_due_after_a_quiet_spell_and_only_once_per_spell() -> None:
    quiet = Quiet(idle_after=5)
    assert not quiet.due(100, 0, now=0)  # first look
    assert not quiet.due(100, 0, now=4)
    assert quiet.due(100, 0, now=5)
    quiet.done()
    assert not quiet.due(100, 0, now=60)  # nothing new was written: no second flush
    assert not quiet.due(130, 0, now=61)  # I/O again
    assert not quiet.due(130, 0, now=65)
    assert quiet.due(130, 0, now=66)


def test_requests_in_flight_are_not_idle() -> None:
    quiet = Quiet(idle_after=1)
    quiet.due(5, 1, now=0)
    assert not quiet.due(5, 1, now=10)


def test_block_stat_counts_reads_and_writes_completed_and_in_flight() -> None:
    # /sys/block/DEV/stat: reads, merges, sectors, ms, writes, merges, sectors, ms, in flight, ...
    counters = parse_block_stat("  120 0 960 30  2048 0 16384 900  2 1000 930 0 0 0 0 0 0")
    assert (counters.reads, counters.writes, counters.in_flight) == (120, 2048, 2)


def test_only_this_sites_idle_destaging_caches_are_watched() -> None:
    profile = with_cache("{disk: /dev/b-fast, destage: idle, idle_after: 3s}")
    assert [(c.name, c.idle_after) for c in local_caches(profile, "b")] == [("remirror-m0-b", 3.0)]
    assert local_caches(profile, "a") == []
    assert local_caches(WRITECACHE, "b") == []


def test_a_disk_with_unknown_facts_gets_no_cache_while_in_use() -> None:
    facts = replace_disk(bare_sites(), "b", "/dev/b0", openers=("pid 42 (dd)",))
    with pytest.raises(PlanError, match=r"/dev/b0 is in use \(open by pid 42 \(dd\)\)"):
        make_plan(WRITECACHE, facts, SECRETS)


def test_disk_facts_default_to_no_devno() -> None:
    assert DiskFacts("/dev/x", True).devno == ""


def test_the_cli_drain_timeout_is_the_planners_and_fits_in_one_agent_request() -> None:
    from remirror.agent.client import AGENT_TIMEOUT
    from remirror.cli.mirror import drain_timeout_option
    from remirror.plan.cache import DRAIN_TIMEOUT, MAX_DRAIN_TIMEOUT

    @drain_timeout_option
    def command(drain_timeout: int) -> None: ...

    (option,) = command.__click_params__  # type: ignore[attr-defined]
    assert (option.default, option.type.max) == (DRAIN_TIMEOUT, MAX_DRAIN_TIMEOUT)
    assert MAX_DRAIN_TIMEOUT < AGENT_TIMEOUT


def test_with_drain_timeout_sets_only_the_drain_steps() -> None:
    from remirror.plan.cache import with_drain_timeout

    sites = converged(WRITECACHE)
    plain = parse_profile(profile_text("sync", "mutual", 1, False, "wan"))
    plan = with_drain_timeout(make_plan(plain, sites.facts, SECRETS), 7)
    assert [s["timeout"] for a in plan.actions for s in wire(a)] == [7]


def test_a_primary_leg_behind_a_cache_is_never_assembled_at_boot_from_its_bare_disk() -> None:
    text = profile_text("sync", "mutual", 1, False, "wan").replace(
        "disk: /dev/a0}", "disk: /dev/a0, cache: {disk: /dev/a-fast}}"
    )
    sites = converged(parse_profile(text))
    assert "ARRAY <ignore> UUID=" in sites.facts["a"].mdadm_conf
    assert "ARRAY /dev/md/m0" not in sites.facts["a"].mdadm_conf


def test_a_drain_cut_short_is_seen_in_the_table_and_taken_up_where_it_stopped() -> None:
    sites = converged(WRITECACHE)
    device = sites.facts["b"].dm["remirror-m0-b"]
    table = parse_dm_table(
        "0 2097152 writecache s 254:1 254:11 4096 5 high_watermark 50 low_watermark 45 cleaner"
    )
    status = dataclasses.replace(CacheStatus(1000, 40, 8), cleaner=True)
    draining = dataclasses.replace(device, table=table, cache=status)
    sites.facts["b"] = dataclasses.replace(sites.facts["b"], dm={"remirror-m0-b": draining})
    plain = parse_profile(profile_text("sync", "mutual", 1, False, "wan"))
    (drain,) = make_plan(plain, sites.facts, SECRETS).actions
    assert "40 dirty block(s), draining already" in drain.subject
    assert wire(drain)[0]["cleaner_table"] is None  # no second reload
    # The profile wants the cache back: cleaner mode is switched off, live.
    (tune,) = make_plan(WRITECACHE, sites.facts, SECRETS).actions
    assert (tune.verb, tune.subject) == ("TuneCache", "remirror-m0-b: cleaner off, live")


def test_only_the_fast_disks_are_read_when_observing() -> None:
    # A read of an iSCSI disk whose link just went down waits for the replacement
    # timeout: observing (each reconciler pass) reads no disk but the would-be caches.
    from remirror.controller import Controller

    probes = Controller(with_cache("{disk: /dev/b-fast}")).probes_by_site()
    assert probes == {"a": [], "b": ["/dev/b-fast"], "c": []}
    assert Controller(parse_profile(profile_text("sync", "mutual", 2, False, "wan"))).probes_by_site() == {
        "a": [],
        "b": [],
        "c": [],
    }
