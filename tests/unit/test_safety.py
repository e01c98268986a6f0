"""Data safety (docs/safety.md): the planner's decisions where remirror could destroy or hide
the data a mirror protects. Each test names the flow of docs/safety.md it pins."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from remirror.facts.generations import first_record
from remirror.facts.model import Signature
from remirror.facts.site import SiteFacts
from remirror.health import State, assess
from remirror.plan import make_plan
from remirror.plan.actions import PlanError, SplitBrain, Verb
from remirror.plan.resolve import make_resolution
from remirror.profile import parse_profile
from remirror.profile.names import array_uuid, by_path
from remirror.roles import as_run, profile_as_run
from tests.unit.simulated_sites import Sites, at_site, conf_text, wire
from tests.unit.test_cache import WRITECACHE, converged
from tests.unit.test_failover import MIRROR, PROFILE, UUID, applied, split
from tests.unit.test_plan_properties import SECRETS, bare_sites, profile_text

FIXTURES = Path(__file__).parent / "fixtures" / "lab-6.1"
REPLICA = MIRROR.replicas[0]
REMOTE = by_path(REPLICA.portal_address, PROFILE.replica_iqn(MIRROR, REPLICA))
EXT4 = Signature("ext4", 0x438, "bebbbe10-27ae-439b-8c3f-662cb952909d", "data")


def with_disk(facts: dict[str, SiteFacts], site: str, path: str, **changes: object) -> dict[str, SiteFacts]:
    """`facts` with one disk of one site changed."""
    old = facts[site]
    disk = dataclasses.replace(old.disks[path], **changes)  # type: ignore[arg-type]
    return {**facts, site: dataclasses.replace(old, disks={**old.disks, path: disk})}


def blank_primary(*signatures: Signature) -> dict[str, SiteFacts]:
    """The mirror built, then site a's disk replaced by a new one and site a restarted: no
    array, no session; the replica's leg on site b still holds the mirror's data."""
    facts = dict(applied().facts)
    facts["a"] = dataclasses.replace(facts["a"], arrays=(), array_links={}, sessions=())
    return with_disk(facts, "a", "/dev/a0", signatures=signatures, superblock=None, leg_record=None)


# --- 1. the primary's disk replaced by a blank one ----------------------------------------


def test_a_blank_primary_disk_is_rebuilt_from_the_replica_never_created_over_it() -> None:
    plan = make_plan(PROFILE, blank_primary(), SECRETS)
    verbs = [f"{a.site} {a.verb}" for a in plan.actions]
    assert "a CreateArray" not in verbs
    assemble = next(a for a in plan.actions if a.verb == "AssembleArray")
    rebuild = next(a for a in plan.actions if a.verb == "RebuildLeg")
    assert verbs.index("a LoginSession") < verbs.index("a AssembleArray") < verbs.index("a RebuildLeg")
    # md runs from the replica's leg alone, then copies all of it onto the new disk.
    assert wire(assemble)[0] == {
        "kind": "assemble_array",
        "md": "/dev/md/m0",
        "uuid": UUID,
        "devices": [REMOTE],
    }
    assert at_site(rebuild)[0]["argv"] == ["mdadm", "/dev/md/m0", "--add", "/dev/a0"]
    assert wire(rebuild)[1] == {"kind": "leg_record_join", "source": REMOTE, "device": "/dev/a0"}
    assert "holds no copy of the mirror (a new disk?)" in assemble.line()
    assert "in full: every block copied from the replica leg" in rebuild.line()
    assert plan.destructive == ()  # the replica is read, the blank disk written: nothing is lost


def test_a_new_primary_disk_with_data_of_its_own_needs_consent() -> None:
    plan = make_plan(PROFILE, blank_primary(EXT4), SECRETS)
    (rebuild,) = plan.destructive
    assert rebuild.verb == "RebuildLeg"
    assert "/dev/a0 holds ext4 filesystem labelled 'data'" in rebuild.destructive


def test_a_new_primary_disk_smaller_than_the_replica_leg_is_refused() -> None:
    facts = with_disk(blank_primary(), "a", "/dev/a0", size=512 * 1024**2)
    with pytest.raises(PlanError, match="smaller than the replica leg"):
        make_plan(PROFILE, facts, SECRETS)


def test_status_says_the_replica_holds_the_data_not_never_built() -> None:
    health = assess(PROFILE, MIRROR, blank_primary())
    assert health.state is State.DEFUNCT
    assert "holds no copy" in health.reason
    assert "the replica leg on b holds its data" in health.reason
    assert "never built" not in health.reason


def test_a_new_array_counts_any_md_superblock_as_data() -> None:
    # Nothing of the mirror on the replica, but an md superblock of this mirror's name on the
    # primary's new disk that does not carry the mirror's UUID is someone's data.
    facts = dict(applied().facts)
    facts["a"] = dataclasses.replace(facts["a"], arrays=(), array_links={}, sessions=())
    facts = with_disk(facts, "a", "/dev/a0", superblock=None, leg_record=None)
    facts = with_disk(facts, "b", "/dev/b0", superblock=None, leg_record=None, signatures=())
    facts["b"] = dataclasses.replace(facts["b"], backstores={}, targets={})
    member = Signature("linux_raid_member", 0x1000, "11111111:22222222:33333333:44444444", "m0")
    facts = with_disk(facts, "a", "/dev/a0", signatures=(member,))
    (create,) = make_plan(PROFILE, facts, SECRETS).destructive
    assert create.verb == "CreateArray"
    assert "md RAID member" in create.destructive


# --- 2. split brain found with the arrays stopped ------------------------------------------


def stopped_split() -> dict[str, SiteFacts]:
    """The lab's split brain (b promoted by force and wrote; a wrote on alone), then both sites
    restarted: no array runs anywhere, each leg's superblock says the other was missing."""
    facts = split(applied())
    return {
        name: dataclasses.replace(f, arrays=(), array_links={}, sessions=())
        for name, f in facts.items()
        if f is not None
    }


def test_split_brain_with_the_arrays_stopped_is_reported_before_any_assemble() -> None:
    facts = stopped_split()
    running = profile_as_run(PROFILE, {"m0": "b"})
    health = assess(running, as_run(MIRROR, "b"), facts)
    assert health.state is State.SPLIT_BRAIN, health
    assert "ran without the primary" in health.reason
    with pytest.raises(SplitBrain, match="split brain") as refused:
        make_plan(running, facts, SECRETS)
    # What `-o json` shows a program (the Ansible module): the reason, not the words.
    assert (refused.value.reason, refused.value.details()) == ("split_brain", {"mirror": "m0"})


def test_legs_that_stopped_in_step_are_assembled_together() -> None:
    facts = dict(applied().facts)
    facts["a"] = dataclasses.replace(facts["a"], arrays=(), array_links={}, sessions=())
    assert assess(PROFILE, MIRROR, facts).state is State.DEFUNCT
    assert [a.verb for a in make_plan(PROFILE, facts, SECRETS).actions][-2:] == [
        "LoginSession",
        "AssembleArray",
    ]


def test_a_split_brain_with_the_arrays_stopped_resolves_without_touching_the_kept_leg() -> None:
    plan = make_resolution(PROFILE, "m0", "a", stopped_split(), None)
    assert [a.verb for a in plan.actions if a.site == "b"].count(Verb.FORGET_ARRAY) == 1
    assert not any(a.site == "a" and a.verb == "ForgetArray" for a in plan.actions)
    assert any(a.site == "a" and a.verb == "AssembleArray" for a in plan.actions)


# --- 3. resolve when the legs' generations conflict ----------------------------------------


def test_resolve_with_conflicting_generations_never_forgets_the_kept_leg() -> None:
    facts = dict(applied().facts)
    for site, disk, who in (("a", "/dev/a0", "a"), ("b", "/dev/b0", "b")):
        claimed = first_record("m0", UUID, "a", 0.0).then(who, 1.0, "forced")
        facts = with_disk(facts, site, disk, leg_record=claimed)
    assert assess(PROFILE, MIRROR, facts).state is State.SPLIT_BRAIN
    for keep, other, leg in (("a", "b", "/dev/b0"), ("b", "a", "/dev/a0")):
        plan = make_resolution(PROFILE, "m0", keep, facts, None)
        forgotten = [a for a in plan.actions if a.verb == "ForgetArray"]
        assert [(a.site, at_site(a)[0]["argv"][-1]) for a in forgotten] == [(other, leg)], keep


# --- 4. a cache added back after a drain ----------------------------------------------------


def test_a_fast_disk_reused_since_the_drain_is_checked_like_a_new_cache_disk() -> None:
    sites = converged(WRITECACHE)
    plain = parse_profile(profile_text("sync", "mutual", 1, False, "wan"))
    drained = sites.run(make_plan(plain, sites.facts, SECRETS))
    (add,) = make_plan(WRITECACHE, drained, SECRETS).actions
    assert (add.verb, add.destructive) == ("AddCache", "")  # what the drain left: clean, ours
    reused = with_disk(drained, "b", "/dev/b-fast", signatures=(EXT4,), first_sector="other")
    (add,) = make_plan(WRITECACHE, reused, SECRETS).actions
    assert add.verb == "AddCache"
    assert "cache disk /dev/b-fast holds ext4 filesystem" in add.destructive


# --- 5. a disk in use without a signature ---------------------------------------------------


def test_a_new_array_on_a_disk_a_process_holds_open_is_refused() -> None:
    facts = with_disk(dict(bare_sites()), "a", "/dev/a0", openers=("pid 42 (qemu-system-x86)",))
    with pytest.raises(PlanError, match=r"/dev/a0 is in use \(open by pid 42 \(qemu-system-x86\)\)"):
        make_plan(PROFILE, facts, SECRETS)


# --- boot: no remote leg at boot -------------------------------------------------------------


def test_node_records_are_manual_and_switching_an_old_one_needs_no_new_login() -> None:
    facts = dict(applied().facts)
    ((key, node),) = facts["a"].nodes.items()
    assert node["node.startup"] == "manual"  # boot's open-iscsi logs in to `automatic` records only
    # A record from an older remirror: updated in place, the running session kept (a logout
    # would fail the leg under md).
    facts["a"] = dataclasses.replace(facts["a"], nodes={key: {**node, "node.startup": "automatic"}})
    plan = make_plan(PROFILE, facts, SECRETS)
    assert [a.verb for a in plan.actions] == ["UpdateIscsiNode"]
    assert at_site(plan.actions[0])[0]["argv"][-4:] == ["-n", "node.startup", "-v", "manual"]


# --- 8. the reconciler's policy: an allow-list decided where each action is built -----------

# What a daemon may do on its own: re-create what apply made (LIO objects and their saved
# config, node records, sessions, caches and CDP stacks of a restarted host) and set what md
# or iSCSI forgot (write-mostly, write-behind, the session timeout). Reviewed by a person:
# a verb joins this list in the change that marks it `repair=True`.
REPAIR_VERBS = {
    "ActivateCdp",
    "ClearWriteMostly",
    "CreateBackstore",
    "CreateCache",
    "CreateIscsiNode",
    "CreateLun",
    "CreateNodeAcl",
    "CreatePortal",
    "CreateTarget",
    "LoginAfresh",
    "LoginSession",
    "ReAddLeg",
    "ResumeResync",
    "ResumeWrites",
    "SaveLioConfig",
    "SetResyncLimit",
    "SetSafeMode",
    "SetScheduler",
    "SetSessionTimeout",
    "SetTargetParameters",
    "SetWriteBehind",
    "SetWriteMostly",
    "UpdateIscsiNode",
    "UpdateNodeAcl",
}


def test_only_actions_built_as_repairs_reach_the_reconciler() -> None:
    from remirror.plan.repair import make_repair
    from tests.unit.simulated_sites import Sites
    from tests.unit.test_plan_properties import PERTURBATIONS, PROFILES, converge

    seen: set[str] = set()
    for name in sorted(PROFILES)[::4]:
        profile = PROFILES[name]
        sites = Sites(bare_sites())
        converge(profile, sites)
        for disturb in PERTURBATIONS.values():
            facts = disturb(dict(sites.facts))
            mirror = profile.mirrors[0]
            planned = make_plan(profile, facts, SECRETS).actions
            done = make_repair(profile, mirror, facts, SECRETS, assess(profile, mirror, facts)).actions
            assert {a.verb for a in done} <= REPAIR_VERBS
            # Apply's own that the daemon leaves alone: built without `repair`.
            left = {a.verb for a in planned if not a.repair}
            assert not left & {a.verb for a in done}
            seen |= {a.verb for a in planned if a.repair}
    assert seen <= REPAIR_VERBS


def test_a_verb_not_marked_as_a_repair_is_left_to_apply() -> None:
    from remirror.plan.repair import make_repair

    # The array's bitmap chunk changed in the profile: apply drops and re-adds the bitmap
    # (ChangeBitmap), which no daemon should do by itself; write-behind is restored with it.
    facts = dict(applied().facts)
    bigger = PROFILE.model_copy(
        update={
            "mirrors": [
                MIRROR.model_copy(
                    update={"replication": MIRROR.replication.model_copy(update={"bitmap_chunk": 2 << 20})}
                )
            ]
        }
    )
    planned = make_plan(bigger, facts, SECRETS).actions
    assert "ChangeBitmap" in [a.verb for a in planned]
    mirror = bigger.mirrors[0]
    done = make_repair(bigger, mirror, facts, SECRETS, assess(bigger, mirror, facts))
    assert "ChangeBitmap" not in [a.verb for a in done.actions]


# --- 10. crash safety and bad input ------------------------------------------------------------


def test_a_file_written_atomically_has_its_rename_made_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from remirror import files

    synced: list[Path] = []
    real = files.fsync_directory

    def fsync_directory(directory: str | Path) -> None:
        synced.append(Path(directory))
        real(directory)

    monkeypatch.setattr(files, "fsync_directory", fsync_directory)
    files.write_atomically(tmp_path / "mdadm.conf", "ARRAY <ignore> UUID=x\n")
    assert (tmp_path / "mdadm.conf").read_text() == "ARRAY <ignore> UUID=x\n"
    assert synced == [tmp_path]


def test_resolve_save_creates_a_private_directory_and_never_writes_over_a_file(tmp_path: Path) -> None:
    import os

    from remirror.agent.generations import _create_private, open_save_directory
    from remirror.errors import RemirrorError

    root = tmp_path / "var/lib/remirror/saved"
    fd = open_save_directory("resolve-1", root)
    try:
        assert root.stat().st_mode & 0o777 == 0o700
        assert (root / "resolve-1").stat().st_mode & 0o777 == 0o700
        with _create_private("m0-b.json", fd) as out:
            out.write(b"{}")
        assert (root / "resolve-1" / "m0-b.json").stat().st_mode & 0o777 == 0o600
        with (
            pytest.raises(RemirrorError, match="already in the --save directory"),
            _create_private("m0-b.json", fd),
        ):
            pass
        # A symlink planted where the file goes is not followed.
        (root / "resolve-1" / "m0-b.img").symlink_to(tmp_path / "elsewhere")
        with (
            pytest.raises(RemirrorError, match="already in the --save directory"),
            _create_private("m0-b.img", fd),
        ):
            pass
        assert not (tmp_path / "elsewhere").exists()
    finally:
        os.close(fd)


@pytest.mark.parametrize("what", ["symlink", "group-writable", "root symlink"])
def test_resolve_save_refuses_a_directory_it_does_not_own_alone(tmp_path: Path, what: str) -> None:
    from remirror.agent.generations import open_save_directory
    from remirror.errors import RemirrorError

    target = tmp_path / "real"
    target.mkdir(mode=0o700)
    root = tmp_path / "saved"
    if what == "root symlink":
        root.symlink_to(target)
    else:
        root.mkdir(mode=0o700)
    if what == "symlink":
        (root / "x").symlink_to(target)
    elif what == "group-writable":
        (root / "x").mkdir()
        (root / "x").chmod(0o770)
    with pytest.raises(RemirrorError, match=r"--save: .* (symlink|writable by nobody else)"):
        open_save_directory("x", root)


@pytest.mark.parametrize("name", ["../x", "/etc/cron.d", "..", ".x", "a/b", "x\ny", ""])
def test_resolve_save_takes_a_name_never_a_path(tmp_path: Path, name: str) -> None:
    from remirror.agent.generations import open_save_directory
    from remirror.errors import RemirrorError

    with pytest.raises(RemirrorError, match="a name"):
        open_save_directory(name, tmp_path / "saved")
    assert not (tmp_path / "saved").exists()


def test_one_disk_under_two_names_is_refused() -> None:
    from remirror.plan.distinct import SameThingTwice, refuse_names_for_the_same_thing

    facts = dict(applied().facts)
    # The replica's cache disk is, under another name, the leg's own disk.
    profile = parse_profile(profile_text("sync", "none", 1, False, "lan", cache="replica-writecache"))
    fast = dataclasses.replace(
        facts["b"].disks["/dev/b-fast"], kernel_name=facts["b"].disks["/dev/b0"].kernel_name
    )
    facts["b"] = dataclasses.replace(facts["b"], disks={**facts["b"].disks, fast.path: fast})
    with pytest.raises(SameThingTwice, match="site b: /dev/b0 and /dev/b-fast are the same disk"):
        refuse_names_for_the_same_thing(profile, facts)
    refuse_names_for_the_same_thing(PROFILE, applied().facts)  # distinct disks and hosts pass


def test_one_host_under_two_site_names_is_refused() -> None:
    from remirror.plan.distinct import SameThingTwice, refuse_names_for_the_same_thing

    facts = dict(applied().facts)
    facts["b"] = dataclasses.replace(facts["b"], hostname=facts["a"].hostname, initiator=facts["a"].initiator)
    with pytest.raises(SameThingTwice, match="sites a and b are one host"):
        refuse_names_for_the_same_thing(PROFILE, facts)


# --- 7. a promotion cut short; a mirror whose leg records were never written --------------------


def test_a_forced_promotion_cut_short_after_its_generation_is_finished_by_running_it_again() -> None:
    from remirror.plan.promote import make_promotion

    sites = applied()
    reached = {**sites.facts, "a": None}
    first = make_promotion(PROFILE, "m0", "b", reached, SECRETS, force=True)
    # It stopped right after writing the generation: the array never ran on site B.
    done = sites  # its memory of what the disks hold (bitmap, write-behind) goes on
    verbs: list[str] = [a.verb for a in first.actions]
    done.run(dataclasses.replace(first, actions=first.actions[: verbs.index("RecordGeneration") + 1]))
    facts = {**done.facts, "a": None}
    with pytest.raises(PlanError, match=r"did not finish.*--force` finishes it"):
        make_promotion(PROFILE, "m0", "b", facts, SECRETS, force=False)
    running = profile_as_run(PROFILE, {"m0": "b"})
    health = assess(running, running.mirrors[0], facts)
    assert health.state is State.DEFUNCT
    assert "a forced promotion that did not finish" in health.reason
    assert "--site b --force` finishes it" in health.reason
    again = make_promotion(PROFILE, "m0", "b", facts, SECRETS, force=True)
    again_verbs: list[str] = [a.verb for a in again.actions]
    assert "RecordGeneration" not in again_verbs  # the generation stands; no third one
    assert "FenceTarget" not in again_verbs  # fenced already
    assert again_verbs.index("AssembleArray") < len(again_verbs)
    assert wire(next(a for a in again.actions if a.verb == "AssembleArray"))[0]["devices"] == ["/dev/b0"]
    done.run(again)
    assert assess(running, running.mirrors[0], {**done.facts, "a": None}).state is not State.DEFUNCT
    with pytest.raises(PlanError, match="already runs on b"):
        make_promotion(PROFILE, "m0", "b", {**done.facts, "a": None}, SECRETS, force=True)


def without_records(data_end: int | None) -> dict[str, SiteFacts]:
    """The mirror running, its create cut short before the leg records (md's data ending at
    `data_end` on each leg)."""
    facts = dict(applied().facts)
    for site in ("a", "b"):
        disks = {
            path: dataclasses.replace(
                disk,
                leg_record=None,
                superblock=None
                if disk.superblock is None
                else dataclasses.replace(disk.superblock, data_end=data_end),
            )
            for path, disk in facts[site].disks.items()
        }
        facts[site] = dataclasses.replace(facts[site], disks=disks)
    return facts


def test_leg_records_never_written_are_written_by_apply_where_md_leaves_room() -> None:
    from remirror.health.report import report
    from remirror.health.seen import Seen

    facts = without_records(data_end=512 * 1024**2)  # well short of a 1 GiB leg's last MiB
    (write,) = [a for a in make_plan(PROFILE, facts, SECRETS).actions if a.verb == "WriteLegRecords"]
    assert not write.repair  # apply's, not a daemon's
    step = wire(write)[0]
    assert (step["kind"], step["site"], step["check_room"]) == ("leg_record_create", "a", True)
    assert step["devices"] == ["/dev/a0", REMOTE]  # the primary's leg and the replica's, a member
    (mirror,) = report(PROFILE, facts, Seen({}), 0.0)
    assert mirror.notes == (
        "no leg of /dev/md/m0 holds a leg record (its create was cut short): it cannot be promoted"
        " until `remirror apply` writes them",
    )


def test_leg_records_are_never_written_where_md_may_use_the_last_mib() -> None:
    from remirror.health.check import DEFAULT_CRITICAL, DEFAULT_WARNING, Status, judge
    from remirror.health.report import report
    from remirror.health.seen import Seen

    facts = without_records(data_end=1 << 30)  # an array over the whole disk
    assert "WriteLegRecords" not in [a.verb for a in make_plan(PROFILE, facts, SECRETS).actions]
    reports = report(PROFILE, facts, Seen({}), 0.0)
    assert "md uses the legs' last MiB" in reports[0].notes[0]
    verdict = judge(reports, DEFAULT_WARNING, DEFAULT_CRITICAL)
    assert verdict.status is Status.WARNING
    assert "it cannot be promoted" in verdict.text


def test_the_agent_checks_for_room_before_writing_a_record() -> None:
    from remirror.facts.parsers import md_data_end

    # Recorded in the lab (tests/unit/fixtures/lab-6.1): an array made over the whole disk
    # (no `--size`) ends where the disk does; one apply made stops short.
    whole = (FIXTURES / "mdadm-examine-clean.txt").read_text()
    assert md_data_end(whole) == 256 * 1024**2
    made = (FIXTURES / "mdadm-examine-apply.txt").read_text()
    end = md_data_end(made)
    assert end is not None
    assert end <= 256 * 1024**2 - 1024**2


# --- 9. a mirror dropped from the profile ---------------------------------------------------------


def test_a_mirror_dropped_from_the_profile_keeps_its_lines_and_is_reported_while_it_runs() -> None:
    from remirror.facts.mdadm_conf import managed_lines
    from remirror.health.report import report
    from remirror.health.seen import Seen
    from remirror.plan import Plan

    facts = dict(applied().facts)
    two = parse_profile(
        profile_text("sync", "mutual", 1, False, "lan").replace("  - name: m0\n", "  - name: m1\n", 1)
    )
    assert array_uuid(two, two.mirrors[0]) != UUID
    # The profile now names another mirror, on the same sites: m0's array still runs on site a.
    plan = make_plan(two, facts, SECRETS)
    (write,) = [a for a in plan.actions if a.verb == "WriteMdadmConf" and a.site == "a"]
    assert UUID not in conf_text(write)  # the step names m1 only: the site keeps the rest of its block
    conf = Sites(facts).run(Plan((write,)))["a"].mdadm_conf
    assert UUID in managed_lines(conf)  # m0's ARRAY line kept: nothing unprotected in silence
    before = managed_lines(facts["a"].mdadm_conf)[UUID]
    assert managed_lines(conf)[UUID] == before
    for r in report(two, facts, Seen({}), 0.0):
        assert any(f"UUID {UUID}" in note and "no longer names" in note for note in r.notes), r.notes


def test_a_dropped_mirrors_export_is_reported_while_it_runs() -> None:
    from remirror.health.report import unmanaged

    facts = dict(applied().facts)
    other = parse_profile(
        profile_text("sync", "mutual", 1, False, "lan").replace("  - name: m0\n", "  - name: m1\n", 1)
    )
    # The profile's own targets are not reported; m0's replica target on site b is.
    assert unmanaged(PROFILE, facts) == {}
    (note,) = [n for n in unmanaged(other, facts)["b"] if "exports" in n]
    assert f"exports {PROFILE.replica_iqn(MIRROR, REPLICA)}," in note
