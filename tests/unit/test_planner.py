"""The planner: given these facts, this plan."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from remirror.facts.mdadm_conf import managed_conf
from remirror.facts.model import IscsiSession, MdArray, MdMember, MdSuperblock, Signature, secret_digest
from remirror.facts.site import DiskFacts, LioAcl, LioTarget, SiteFacts
from remirror.plan import PlanError, make_plan
from remirror.profile import load_profile
from remirror.profile.names import array_uuid, backstore_name, by_path
from remirror.profile.timeouts import IN_ORDER_TARGET
from tests.conftest import PROFILES
from tests.unit.simulated_sites import at_site, bare_site, node_updates, wire

PROFILE = load_profile(PROFILES / "lab.yaml")
MIRROR = PROFILE.mirrors[0]
REPLICA = MIRROR.replicas[0]
IQN = PROFILE.replica_iqn(MIRROR, REPLICA)
INITIATOR = "iqn.2026-11.org.remirror.lab:site-a"
SECRETS = {
    "/etc/remirror/lab/lab0.chap": "initiator-secret-1",
    "/etc/remirror/lab/lab0.chap.mutual": "target-secret-22",
}
UUID = array_uuid(PROFILE, MIRROR)
EXT4 = Signature("ext4", 0x438, "bebbbe10-27ae-439b-8c3f-662cb952909d", "data")


def disk(path: str, name: str, *signatures: Signature, superblock: MdSuperblock | None = None) -> DiskFacts:
    return DiskFacts(path, True, name, 256 * 1024**2, signatures, superblock)


def site(name: str, **changes: Any) -> SiteFacts:
    base = bare_site(
        name,
        INITIATOR if name == "site-a" else "iqn.2026-11.org.remirror.lab:site-b",
        {"/dev/lab/a0": disk("/dev/lab/a0", "dm-0"), "/dev/lab/b0": disk("/dev/lab/b0", "dm-4")},
        "/etc/target/saveconfig.json",
    )
    return dataclasses.replace(base, **changes)


def fresh() -> dict[str, SiteFacts]:
    return {"site-a": site("site-a"), "site-b": site("site-b")}


def converged() -> dict[str, SiteFacts]:
    """The state the lab is in after a successful apply."""
    chap = {
        "node.session.auth.authmethod": "CHAP",
        "node.session.auth.username": "lab0",
        "node.session.auth.password": secret_digest(SECRETS["/etc/remirror/lab/lab0.chap"]),
        "node.session.auth.username_in": "lab0",
        "node.session.auth.password_in": secret_digest(SECRETS["/etc/remirror/lab/lab0.chap.mutual"]),
    }
    node = {"node.startup": "manual", **MIRROR.iscsi.node_settings("degrade"), **chap}
    array = MdArray(
        "md127", "lab0", UUID, "raid1", 2,
        (MdMember("dm-0", 1, frozenset({"in_sync"})), MdMember("sda", 0, frozenset({"in_sync", "write_mostly"}))),
        "clean", "idle", None, 0, 1024**2, 1024, 0,
    )  # fmt: skip
    acl = LioAcl("lab0", secret_digest("initiator-secret-1"), "lab0", secret_digest("target-secret-22"), (0,))
    target = LioTarget(
        True,
        ("192.0.2.2:3260",),
        {0: backstore_name(MIRROR, REPLICA)},
        "1",
        {INITIATOR: acl},
        dict(IN_ORDER_TARGET),
    )
    a = site(
        "site-a",
        arrays=(array,),
        array_links={"md127": ("lab0",)},
        sessions=(IscsiSession(1, IQN, "192.0.2.2", 3260, "LOGGED_IN", "sda"),),
        nodes={(IQN, "192.0.2.2,3260,1"): node},
        mdadm_conf=managed_conf("", [f"ARRAY /dev/md/lab0 metadata=1.2 UUID={UUID} name=lab0"]),
    )
    b = site(
        "site-b",
        backstores={backstore_name(MIRROR, REPLICA): "/dev/lab/b0"},
        targets={IQN: target},
        mdadm_conf=managed_conf("", [f"ARRAY <ignore> UUID={UUID}"]),
    )
    return {"site-a": a, "site-b": b}


def verbs(facts: dict[str, SiteFacts]) -> list[str]:
    return [f"{a.site} {a.verb}" for a in make_plan(PROFILE, facts, SECRETS).actions]


def test_from_nothing_the_replica_side_comes_first_then_the_primary() -> None:
    assert verbs(fresh()) == [
        "site-b CreateBackstore",
        "site-b CreateTarget",
        "site-b CreatePortal",
        "site-b CreateLun",
        "site-b CreateNodeAcl",
        "site-b SaveLioConfig",
        "site-a CreateIscsiNode",
        "site-a LoginSession",
        "site-a CreateArray",
        "site-a WriteMdadmConf",
        "site-b WriteMdadmConf",
    ]


def test_the_array_is_created_with_bitmap_write_behind_and_a_write_mostly_remote_leg() -> None:
    create = next(a for a in make_plan(PROFILE, fresh(), SECRETS).actions if a.verb == "CreateArray")
    argv = at_site(create)[0]["argv"]
    assert argv[:3] == ["mdadm", "--create", "/dev/md/lab0"]
    assert {"--bitmap=internal", "--bitmap-chunk=1024K", "--write-behind=1024", f"--uuid={UUID}"} <= set(argv)
    # md sends writes behind only to a write-mostly leg in the first slot (raid1.c, 6.1): the
    # replica's slot is left free at the create and the replica added into it, then made
    # write-mostly; the local leg, last, is not write-mostly. The replica is added without md's
    # bad block log (remirror.agent.md_legs): a write it fails fails it, the bitmap keeps it.
    assert argv[-2:] == ["missing", "/dev/lab/a0"]
    assert "--write-mostly" not in argv
    steps = wire(create)
    assert [s["kind"] for s in steps] == [
        "md_create", "wait_path", "md_attribute", "add_replica_legs", "member_state", "leg_record_create"
    ]  # fmt: skip
    # md's safe mode, lengthened before the first write (plan/safe_mode.py).
    assert steps[2] == {
        "kind": "md_attribute",
        "md": "/dev/md/lab0",
        "attribute": "safe_mode_delay",
        "value": "10",
    }
    steps = steps[:2] + steps[3:]
    assert steps[2] == {
        "kind": "add_replica_legs",
        "md": "/dev/md/lab0",
        "devices": [by_path(REPLICA.portal_address, IQN)],
    }
    assert steps[3] == {
        "kind": "member_state",
        "md": "/dev/md/lab0",
        "device": by_path(REPLICA.portal_address, IQN),
        "value": "writemostly",
    }
    assert steps[4]["devices"] == ["/dev/lab/a0", by_path(REPLICA.portal_address, IQN)]
    assert not create.destructive


def test_a_converged_site_needs_nothing() -> None:
    plan = make_plan(PROFILE, converged(), SECRETS)
    assert plan.is_empty, [a.line() for a in plan.actions]
    assert plan.summary() == "No changes: the sites match the profile."


def with_array(facts: dict[str, SiteFacts], **changes: Any) -> dict[str, SiteFacts]:
    (array,) = facts["site-a"].arrays
    return {
        **facts,
        "site-a": dataclasses.replace(facts["site-a"], arrays=(dataclasses.replace(array, **changes),)),
    }


LOCAL_FIRST = (
    MdMember("dm-0", 0, frozenset({"in_sync"})),
    MdMember("sda", 1, frozenset({"in_sync", "write_mostly"})),
)


def test_an_async_array_with_the_local_leg_first_has_it_moved_last() -> None:
    # Made by an older remirror, or assembled on a promoted site: md would send no write behind.
    plan = make_plan(PROFILE, with_array(converged(), members=LOCAL_FIRST), SECRETS)
    assert [a.verb for a in plan.actions] == ["ReorderLegs"]
    (move,) = plan.actions
    assert wire(move) == [{"kind": "local_leg_last", "md": "/dev/md/lab0", "device": "/dev/lab/a0"}]
    assert not move.repair  # a reshape: apply's, never the reconciler's
    assert not move.destructive
    assert "from slot 0 to the last" in move.line()


def sync_profile() -> Any:
    from remirror.profile import parse_profile

    text = (
        (PROFILES / "lab.yaml")
        .read_text()
        .replace("mode: async", "mode: sync")
        .replace("      write_behind: 1024        # distinct from md's default 256, so tests can tell\n", "")
    )
    return parse_profile(text)


def test_the_legs_are_moved_only_when_async_and_every_leg_is_in_sync() -> None:
    facts = with_array(converged(), members=LOCAL_FIRST, backlog=0)
    assert make_plan(sync_profile(), facts, SECRETS).is_empty  # nothing goes behind in sync mode
    resyncing = (LOCAL_FIRST[0], MdMember("sda", 1, frozenset({"write_mostly"})))
    facts = with_array(converged(), members=resyncing, sync_action="recover")
    assert "ReorderLegs" not in [a.verb for a in make_plan(PROFILE, facts, SECRETS).actions]
    facts = with_array(converged(), members=LOCAL_FIRST[:1], degraded=1)
    assert "ReorderLegs" not in [a.verb for a in make_plan(PROFILE, facts, SECRETS).actions]


def test_writes_left_held_by_an_unfinished_move_are_let_go_by_a_repair() -> None:
    plan = make_plan(PROFILE, with_array(converged(), writes_suspended=True), SECRETS)
    (resume,) = plan.actions
    assert resume.verb == "ResumeWrites"
    assert resume.repair
    assert wire(resume) == [
        {"kind": "md_attribute", "md": "/dev/md127", "attribute": "suspend_hi", "value": "0"}
    ]


def test_a_check_debian_started_on_the_mirror_is_stopped_as_a_repair() -> None:
    from remirror.health import assess
    from remirror.plan.repair import make_repair

    # checkarray or mdcheck, the first Sunday of the month: md would read the replica leg whole.
    (stop,) = make_plan(PROFILE, with_array(converged(), sync_action="check"), SECRETS).actions
    assert (stop.verb, stop.repair) == ("StopCheck", True)
    assert wire(stop) == [
        {"kind": "md_attribute", "md": "/dev/md127", "attribute": "sync_action", "value": "idle"}
    ]
    checking = with_array(converged(), sync_action="check")
    repair = make_repair(PROFILE, MIRROR, checking, SECRETS, assess(PROFILE, MIRROR, checking))
    assert [a.verb for a in repair.actions] == ["StopCheck"]  # the reconciler's too
    # An operator's `repair`, or md's own resync, is left to run.
    for action in ("repair", "resync", "recover"):
        assert not make_plan(PROFILE, with_array(converged(), sync_action=action), SECRETS).actions


def test_secrets_appear_in_steps_only_never_in_what_is_shown() -> None:
    plan = make_plan(PROFILE, fresh(), SECRETS)
    shown = " ".join(a.line() + str(a.as_json()) for a in plan.actions)
    assert "initiator-secret-1" not in shown
    assert "target-secret-22" not in shown
    steps_with_secrets = [s for a in plan.actions for s in wire(a) if "initiator-secret-1" in str(s)]
    assert steps_with_secrets
    assert all("initiator-secret-1" in s["secrets"] for s in steps_with_secrets)
    # No secret in any argv: `ps` shows argv to every user of the host.
    argvs = " ".join(" ".join(s.get("argv", [])) for a in plan.actions for s in at_site(a))
    assert "initiator-secret-1" not in argvs
    assert "target-secret-22" not in argvs


def test_a_filesystem_on_the_local_disk_makes_create_destructive() -> None:
    facts = fresh()
    facts["site-a"] = site("site-a", disks={"/dev/lab/a0": disk("/dev/lab/a0", "dm-0", EXT4)})
    plan = make_plan(PROFILE, facts, SECRETS)
    (create,) = plan.destructive
    assert create.verb == "CreateArray"
    assert create.destructive == (
        "site site-a: /dev/lab/a0 holds ext4 filesystem labelled 'data' (UUID bebbbe10-27ae-439b-8c3f-662cb952909d)"
    )
    assert "[DESTROYS: " in create.line()


def test_an_lvm_replica_disk_makes_its_export_destructive() -> None:
    facts = fresh()
    lvm = Signature("LVM2_member", 0x218, "4iHVRu-kAOB", None)
    facts["site-b"] = site("site-b", disks={"/dev/lab/b0": disk("/dev/lab/b0", "dm-4", lvm)})
    assert [a.verb for a in make_plan(PROFILE, facts, SECRETS).destructive] == [
        "CreateBackstore",
        "CreateArray",
    ]


def test_a_replica_disk_with_this_arrays_superblock_is_exported_and_the_array_run_from_it() -> None:
    # The replica holds the mirror; the primary's disk nothing: never `mdadm --create` (its
    # initial sync would copy the blank disk over the replica). docs/safety.md, flow 1.
    facts = fresh()
    ours = MdSuperblock(UUID, "lab0", "f4da7c83:e34a24c7:d8a7bc9d:8442c3a3", 18)
    member = Signature("linux_raid_member", 0x1000, UUID, "lab0")
    facts["site-b"] = site(
        "site-b", disks={"/dev/lab/b0": disk("/dev/lab/b0", "dm-4", member, superblock=ours)}
    )
    plan = make_plan(PROFILE, facts, SECRETS)
    assert plan.destructive == ()
    assert verbs(facts)[-4:] == [
        "site-a AssembleArray",
        "site-a RebuildLeg",
        "site-a WriteMdadmConf",
        "site-b WriteMdadmConf",
    ]


def test_the_local_disk_with_this_arrays_superblock_is_assembled() -> None:
    facts = converged()
    ours = MdSuperblock(UUID, "lab0", "09d9f39b:52c83ce4:460cf5e6:8e61ce43", 18)
    local = disk("/dev/lab/a0", "dm-0", Signature("linux_raid_member", 0x1000, UUID, "lab0"), superblock=ours)
    facts["site-a"] = dataclasses.replace(
        facts["site-a"], arrays=(), disks={**facts["site-a"].disks, "/dev/lab/a0": local}
    )
    assert verbs(facts) == ["site-a AssembleArray"]


def test_a_new_write_behind_changes_the_live_array() -> None:
    profile = load_profile(PROFILES / "lab.yaml")
    text = (PROFILES / "lab.yaml").read_text().replace("write_behind: 1024", "write_behind: 64")
    from remirror.profile import parse_profile

    changed = parse_profile(text)
    plan = make_plan(changed, converged(), SECRETS)
    assert [a.verb for a in plan.actions] == ["SetWriteBehind"]
    (step,) = wire(plan.actions[0])
    assert step == {"kind": "md_attribute", "md": "/dev/md127", "attribute": "bitmap/backlog", "value": "64"}
    assert profile.mirrors[0].replication.write_behind == 1024


def test_an_assembled_array_s_safe_mode_is_lengthened_live() -> None:
    # md sets 0.2 s at each assembly: every burst after that long idle would wait for a
    # superblock write on the replica's leg, over the link (plan/md.SAFE_MODE_DELAY).
    plan = make_plan(
        load_profile(PROFILES / "lab.yaml"), with_array(converged(), safe_mode_delay=0.204), SECRETS
    )
    assert [a.verb for a in plan.actions] == ["SetSafeMode"]
    (step,) = wire(plan.actions[0])
    assert step == {"kind": "md_attribute", "md": "/dev/md127", "attribute": "safe_mode_delay", "value": "10"}
    assert plan.actions[0].repair  # the reconciler sets it too, after a boot's assembly
    settled = with_array(converged(), safe_mode_delay=10.0)
    assert make_plan(load_profile(PROFILES / "lab.yaml"), settled, SECRETS).is_empty


def test_sync_mode_sets_the_backlog_to_zero() -> None:
    plan = make_plan(sync_profile(), converged(), SECRETS)
    assert [(a.verb, wire(a)[0]["value"]) for a in plan.actions] == [("SetWriteBehind", "0")]


def test_a_changed_secret_updates_both_sides_and_logs_in_again() -> None:
    secrets = {**SECRETS, "/etc/remirror/lab/lab0.chap": "a-brand-new-secret"}
    assert verbs_with(secrets) == [
        "site-b UpdateNodeAcl",
        "site-b SaveLioConfig",
        "site-a UpdateIscsiNode",
        "site-a LoginSession",
    ]


def verbs_with(secrets: dict[str, str]) -> list[str]:
    return [f"{a.site} {a.verb}" for a in make_plan(PROFILE, converged(), secrets).actions]


def test_a_missing_disk_is_named_with_its_profile_line() -> None:
    facts = fresh()
    facts["site-b"] = site("site-b", disks={"/dev/lab/b0": DiskFacts("/dev/lab/b0", False)})
    with pytest.raises(PlanError) as caught:
        make_plan(PROFILE, facts, SECRETS)
    line = PROFILE.where("mirrors", 0, "replicas", 0, "disk")
    assert str(caught.value) == f"{line}: site site-b: disk /dev/lab/b0 does not exist"


def test_every_missing_disk_is_named_at_once_a_line_each() -> None:
    facts = fresh()
    facts["site-a"] = dataclasses.replace(facts["site-a"], disks={})
    facts["site-b"] = site("site-b", disks={"/dev/lab/b0": DiskFacts("/dev/lab/b0", False)})
    with pytest.raises(PlanError) as caught:
        make_plan(PROFILE, facts, SECRETS)
    replica = PROFILE.where("mirrors", 0, "replicas", 0, "disk")
    primary = PROFILE.where("mirrors", 0, "primary", "disk")
    assert caught.value.one_line().splitlines() == [
        f"{replica}: site site-b: disk /dev/lab/b0 does not exist",
        f"{primary}: site site-a: disk /dev/lab/a0 does not exist",
    ]


def test_an_empty_disk_is_refused_with_its_size() -> None:
    # Found reading it as a new user: a loop device on an empty file ended in
    # "internal error: OSError" (the leg record's place, the last MiB, is before the start).
    facts = fresh()
    empty = dataclasses.replace(disk("/dev/lab/b0", "loop0"), size=0)
    facts["site-b"] = site("site-b", disks={"/dev/lab/b0": empty})
    with pytest.raises(PlanError) as caught:
        make_plan(PROFILE, facts, SECRETS)
    line = PROFILE.where("mirrors", 0, "replicas", 0, "disk")
    assert caught.value.one_line() == (
        f"{line}: site site-b: disk /dev/lab/b0 holds 0 bytes: too small for a disk (at least 16MiB)"
    )


def test_a_disk_whose_session_is_down_is_not_called_too_small() -> None:
    # An offline SCSI disk is not looked into, so its size is unknown (0), not small.
    facts = fresh()
    offline = dataclasses.replace(disk("/dev/lab/b0", "sdb"), size=0, offline="blocked")
    facts["site-b"] = site("site-b", disks={"/dev/lab/b0": offline})
    assert make_plan(PROFILE, facts, SECRETS).actions  # planned as before: not refused


def test_a_disk_in_use_is_not_exported() -> None:
    facts = fresh()
    busy = dataclasses.replace(disk("/dev/lab/b0", "dm-4"), holders=("md126",), mounts=("/srv",))
    facts["site-b"] = site("site-b", disks={"/dev/lab/b0": busy})
    with pytest.raises(PlanError, match=r"/dev/lab/b0 is in use \(mounted on /srv; held by md126\)"):
        make_plan(PROFILE, facts, SECRETS)


def test_the_array_uuid_is_stable_and_in_mdadm_form() -> None:
    assert array_uuid(PROFILE, MIRROR) == UUID
    assert [len(part) for part in UUID.split(":")] == [8, 8, 8, 8]


def test_the_managed_conf_block_keeps_everything_else() -> None:
    original = "DEVICE partitions\nHOMEHOST <system>\n"
    once = managed_conf(original, ["ARRAY /dev/md/x UUID=1"])
    assert once.startswith(original)
    twice = managed_conf(once, ["ARRAY /dev/md/x UUID=2"])
    assert twice.count("ARRAY") == 1
    assert "UUID=2" in twice
    assert managed_conf(twice, ["ARRAY /dev/md/x UUID=2"]) == twice


def test_a_session_that_is_not_logged_in_is_logged_in_again() -> None:
    facts = converged()
    failed = dataclasses.replace(facts["site-a"].sessions[0], state="FAILED")
    facts["site-a"] = dataclasses.replace(facts["site-a"], sessions=(failed,))
    (action,) = make_plan(PROFILE, facts, SECRETS).actions
    assert (action.site, action.verb) == ("site-a", "LoginSession")
    assert [s["argv"][-1] for s in at_site(action) if s["kind"] == "run"] == ["--login"]


def test_the_replica_is_exported_and_logged_in_to_so_that_writes_arrive_in_the_order_sent() -> None:
    # With LIO's defaults a write over 8 KiB waits a round trip for an R2T while a smaller one
    # sent after it goes through: after a disaster site B could hold a commit without what it
    # commits (profile/timeouts.py).
    plan = make_plan(PROFILE, fresh(), SECRETS).actions
    target = next(a for a in plan if a.verb == "CreateTarget")
    assert wire(target)[0]["parameters"] == {
        "InitialR2T": "No",
        "ImmediateData": "Yes",
        "FirstBurstLength": "16776192",
        "MaxBurstLength": "16776192",
        "MaxRecvDataSegmentLength": "262144",
    }
    node = next(a for a in plan if a.verb == "CreateIscsiNode")
    updates = {
        k: v
        for s in at_site(node)
        if "update" in s.get("argv", [])
        for k, v in node_updates(s["argv"]).items()
    }
    assert updates["node.session.iscsi.InitialR2T"] == "No"
    assert updates["node.session.iscsi.FirstBurstLength"] == "16776192"
    login = next(a for a in plan if a.verb == "LoginSession")
    assert wire(login)[-1] == {
        "kind": "disk_sysfs",
        "device": by_path(REPLICA.portal_address, IQN),
        "attribute": "queue/scheduler",
        "value": "none",
    }


def with_session(facts: dict[str, SiteFacts], **changes: Any) -> dict[str, SiteFacts]:
    sessions = tuple(dataclasses.replace(s, **changes) for s in facts["site-a"].sessions)
    return {**facts, "site-a": dataclasses.replace(facts["site-a"], sessions=sessions)}


def test_an_async_session_that_lets_writes_overtake_each_other_logs_in_again() -> None:
    facts = with_session(converged(), initial_r2t=True, immediate_data=True, first_burst=65536)
    plan = make_plan(PROFILE, facts, SECRETS)
    assert [a.verb for a in plan.actions] == ["LoginSession"]
    assert [s["kind"] for s in wire(plan.actions[0])] == [
        "iscsi_node",
        "iscsi_node",
        "wait_path",
        "disk_sysfs",
    ]
    assert at_site(plan.actions[0])[0]["argv"][-1] == "--logout"
    # In sync mode every write waits for both legs: their order on the wire changes nothing at B.
    assert make_plan(sync_profile(), with_array(facts, backlog=0), SECRETS).is_empty
    # Negotiated in order: nothing to do.
    assert make_plan(
        PROFILE,
        with_session(converged(), initial_r2t=False, immediate_data=True, first_burst=16776192),
        SECRETS,
    ).is_empty


def test_a_target_restored_with_other_login_parameters_gets_them_back() -> None:
    facts = converged()
    restored = {IQN: dataclasses.replace(facts["site-b"].targets[IQN], parameters={"InitialR2T": "Yes"})}
    facts["site-b"] = dataclasses.replace(facts["site-b"], targets=restored)
    plan = make_plan(PROFILE, facts, SECRETS)
    assert [a.verb for a in plan.actions] == ["SetTargetParameters", "SaveLioConfig"]
    assert plan.actions[0].repair
    assert "InitialR2T=No" in plan.actions[0].line()


def test_a_replica_disk_with_an_io_scheduler_gets_none() -> None:
    plan = make_plan(PROFILE, with_session(converged(), scheduler="mq-deadline"), SECRETS)
    assert [a.verb for a in plan.actions] == ["SetScheduler"]
    assert plan.actions[0].repair
    assert wire(plan.actions[0]) == [
        {
            "kind": "disk_sysfs",
            "device": by_path(REPLICA.portal_address, IQN),
            "attribute": "queue/scheduler",
            "value": "none",
        }
    ]


def limited_profile(limit: str) -> Any:
    from remirror.profile import parse_profile

    text = (PROFILES / "lab.yaml").read_text()
    return parse_profile(
        text.replace(
            "      on_link_loss: degrade\n", f"      on_link_loss: degrade\n      resync_max: {limit}\n"
        )
    )


def test_a_resync_limit_is_set_before_the_initial_sync_and_changed_live() -> None:
    limited = limited_profile("40MiB")
    create = next(a for a in make_plan(limited, fresh(), SECRETS).actions if a.verb == "CreateArray")
    kinds = [s["kind"] for s in wire(create)]
    # Right after the array exists, before the replica legs are added (each add starts the sync).
    assert kinds.index("md_attribute") < kinds.index("add_replica_legs")
    limits = [
        (s["md"], s["attribute"], s["value"])
        for s in wire(create)
        if s["kind"] == "md_attribute" and s["attribute"] != "safe_mode_delay"
    ]
    # The limit, and the array's floor at md's default (1000 KiB/s), whatever the system's is:
    # md holds a resync to its limit only above its floor.
    assert limits == [
        ("/dev/md/lab0", "sync_speed_min", "1000"),
        ("/dev/md/lab0", "sync_speed_max", "40960"),
    ]
    # A running array without them (assembled: md forgets them), or with others: sysfs writes, live.
    plan = make_plan(limited, converged(), SECRETS)
    assert [a.verb for a in plan.actions] == ["SetResyncLimit"]
    assert plan.actions[0].repair
    assert plan.actions[0].subject == (
        "/dev/md/lab0 resync limit the system's -> 40MiB/s (floor the system's -> 1000KiB/s)"
    )
    assert wire(plan.actions[0]) == [
        {"kind": "md_attribute", "md": "/dev/md127", "attribute": "sync_speed_min", "value": "1000"},
        {"kind": "md_attribute", "md": "/dev/md127", "attribute": "sync_speed_max", "value": "40960"},
    ]
    limited_array = with_array(converged(), sync_speed_max=40 << 20, sync_speed_min=1000 << 10)
    assert make_plan(limited, limited_array, SECRETS).is_empty
    # Only what differs is written.
    only_max = make_plan(
        limited, with_array(converged(), sync_speed_max=8 << 20, sync_speed_min=1000 << 10), SECRETS
    )
    assert only_max.actions[0].subject == "/dev/md/lab0 resync limit 8MiB/s -> 40MiB/s"
    assert [s["attribute"] for s in wire(only_max.actions[0])] == ["sync_speed_max"]
    # A profile without one leaves md's limits alone, an operator's own included.
    assert make_plan(PROFILE, limited_array, SECRETS).is_empty


def test_a_resync_limit_under_mds_floor_takes_the_floor_down_with_it() -> None:
    """A 10 Mbit/s link carries 1.2 MB/s: a limit of 256 KiB/s holds only with a floor under it."""
    plan = make_plan(limited_profile("256KiB"), converged(), SECRETS)
    assert wire(plan.actions[0]) == [
        {"kind": "md_attribute", "md": "/dev/md127", "attribute": "sync_speed_min", "value": "256"},
        {"kind": "md_attribute", "md": "/dev/md127", "attribute": "sync_speed_max", "value": "256"},
    ]
    # md counts in KiB/s: a limit in other units is what md will hold to.
    assert limited_profile("1MB").mirrors[0].replication.resync_max == 976 * 1024


def scheduled_profile(resync_max: str = "") -> Any:
    """The lab's profile with an office's schedule: the link kept for work on weekdays."""
    from remirror.profile import parse_profile

    limit = f"      resync_max: {resync_max}\n" if resync_max else ""
    schedule = (
        "      schedule:\n"
        '        "Mon-Fri 08:00-18:00": 10Mbit\n'
        '        "Sat 22:00-02:00": 6MB/s\n' + ("" if resync_max else "        default: unlimited\n")
    )
    text = (PROFILES / "lab.yaml").read_text()
    return parse_profile(
        text.replace("      on_link_loss: degrade\n", f"      on_link_loss: degrade\n{limit}{schedule}")
    )


def at_time(facts: dict[str, SiteFacts], text: str) -> dict[str, SiteFacts]:
    """The sites with the primary's clock at `text` (ISO, its own offset from UTC)."""
    from datetime import datetime

    return {**facts, "site-a": dataclasses.replace(facts["site-a"], local_time=datetime.fromisoformat(text))}


def test_a_schedule_sets_the_windows_limit_by_the_primarys_clock_and_unlimited_is_mds_own() -> None:
    office = scheduled_profile()
    # 2026-11-30 is a Monday. Working hours: 10 Mbit/s (1,250,000 B/s, held as 1220 KiB/s).
    plan = make_plan(office, at_time(converged(), "2026-11-30T09:30:00+01:00"), SECRETS)
    assert [a.verb for a in plan.actions] == ["SetResyncLimit"]
    assert plan.actions[0].subject == (
        "/dev/md/lab0 resync limit the system's -> 1220KiB/s (floor the system's -> 1000KiB/s),"
        " window Mon-Fri 08:00-18:00"
    )
    assert [s["value"] for s in wire(plan.actions[0])] == ["1000", "1220"]
    # At the window's edge the limit goes back to md's own (`unlimited`): `system` in both files.
    held = with_array(converged(), sync_speed_max=1220 << 10, sync_speed_min=1000 << 10)
    assert make_plan(office, at_time(held, "2026-11-30T17:59:00+01:00"), SECRETS).is_empty
    evening = make_plan(office, at_time(held, "2026-11-30T18:00:00+01:00"), SECRETS)
    assert evening.actions[0].subject == (
        "/dev/md/lab0 resync limit 1220KiB/s -> the system's (floor 1000KiB/s -> the system's),"
        " outside the schedule's windows"
    )
    assert [(s["attribute"], s["value"]) for s in wire(evening.actions[0])] == [
        ("sync_speed_min", "system"),
        ("sync_speed_max", "system"),
    ]
    assert make_plan(office, at_time(converged(), "2026-11-30T18:00:00+01:00"), SECRETS).is_empty
    # A window past midnight holds on the next day's first hours (Saturday 22:00 to Sunday 02:00).
    sunday = make_plan(office, at_time(converged(), "2026-12-06T01:59:00+00:00"), SECRETS)
    assert [s["value"] for s in wire(sunday.actions[0])] == ["1000", str(6_000_000 // 1024)]
    # Without `default`, resync_max holds outside the windows.
    nights = make_plan(scheduled_profile("40MiB"), at_time(converged(), "2026-11-30T23:00:00+01:00"), SECRETS)
    assert [s["value"] for s in wire(nights.actions[0])] == ["1000", "40960"]
    # A new array starts at the limit of its window, before the initial sync.
    created = make_plan(office, at_time(fresh(), "2026-11-30T09:30:00+01:00"), SECRETS)
    create = next(a for a in created.actions if a.verb == "CreateArray")
    limits = [
        s["value"]
        for s in wire(create)
        if s["kind"] == "md_attribute" and s["attribute"] != "safe_mode_delay"
    ]
    assert limits == ["1000", "1220"]


def test_a_schedule_without_the_primarys_clock_leaves_mds_limits_as_they_are() -> None:
    """Facts without a believable clock (recorded, or a site's clock in another century): which
    window holds is not known, and the limit md holds was set by the clock last known."""
    held = with_array(converged(), sync_speed_max=1220 << 10, sync_speed_min=1000 << 10)
    assert make_plan(scheduled_profile("40MiB"), held, SECRETS).is_empty
    assert make_plan(scheduled_profile(), converged(), SECRETS).is_empty
    lost = {**held, "site-a": dataclasses.replace(held["site-a"], local_time=None)}
    assert make_plan(scheduled_profile(), lost, SECRETS).is_empty


def test_a_resync_limit_too_slow_to_ever_finish_is_refused() -> None:
    from remirror.errors import ProfileError

    with pytest.raises(ProfileError, match=r"resync_max.*at least 64KiB"):
        limited_profile("32KiB")


def test_initial_sync_skip_proves_each_leg_blank_on_its_site_then_creates_without_a_copy() -> None:
    from remirror.profile import parse_profile

    text = (PROFILES / "lab.yaml").read_text()
    skip = parse_profile(
        text.replace(
            "      on_link_loss: degrade\n", "      on_link_loss: degrade\n      initial_sync: skip\n"
        )
    )
    actions = make_plan(skip, fresh(), SECRETS).actions
    verbs = [f"{a.site} {a.verb}" for a in actions]
    # Each site reads its own leg (only the verdict crosses the link), before the create.
    proofs = [a for a in actions if a.verb == "ProveBlank"]
    assert [(a.site, wire(a)[0]["device"]) for a in proofs] == [
        ("site-b", "/dev/lab/b0"),
        ("site-a", "/dev/lab/a0"),
    ]
    # Both proofs before anything of the mirror: a leg with data stops the plan before an
    # export or a login holds a disk.
    assert verbs[:2] == ["site-b ProveBlank", "site-a ProveBlank"]
    assert wire(proofs[0])[0]["timeout"] > 60  # a whole disk is read: longer than a request's usual wait
    create = next(a for a in actions if a.verb == "CreateArray")
    steps = at_site(create)
    argv = steps[0]["argv"]
    # Every leg at once, the replica first (write-behind needs a write-mostly leg in slot 0),
    # and no initial sync: nothing is added afterwards, so nothing is recovered.
    assert argv[-3:] == ["--assume-clean", by_path(REPLICA.portal_address, IQN), "/dev/lab/a0"]
    assert "missing" not in argv
    # mdadm's create gives each leg a bad block log: the replica's is dropped at once, in place
    # (nothing to resync), and a write the replica fails then fails it (remirror.agent.md_legs).
    assert [s["kind"] for s in steps] == [
        "run", "wait_path", "drop_bad_block_log", "member_state", "md_attribute", "leg_record_create"
    ]  # fmt: skip
    assert "no initial sync" in create.subject
    # The usual create has no proof and copies the primary leg (the add starts a recovery).
    assert not [a for a in make_plan(PROFILE, fresh(), SECRETS).actions if a.verb == "ProveBlank"]


def test_a_site_whose_initiator_is_not_the_one_its_profile_names_is_refused(tmp_path: Any) -> None:
    # The DR site's target takes an ACL for the named initiator only (docs/security.md): a primary
    # that says another is stopped at the plan, with the profile's line, before anything changes.
    text = (PROFILES / "lab.yaml").read_text()
    named = text.replace("    host: local\n", f"    host: local\n    initiator: {INITIATOR}\n", 1)
    assert named != text
    path = tmp_path / "lab.yaml"
    path.write_text(named)
    profile = load_profile(path)
    assert make_plan(profile, fresh(), SECRETS).actions  # site-a says the named one: planned
    facts = fresh()
    facts["site-a"] = dataclasses.replace(facts["site-a"], initiator="iqn.2026-11.org.example:other")
    with pytest.raises(PlanError) as caught:
        make_plan(profile, facts, SECRETS)
    assert str(caught.value) == (
        f"{profile.where('sites', 'site-a', 'initiator')}: site site-a's initiator name is"
        f" iqn.2026-11.org.example:other (/etc/iscsi/initiatorname.iscsi), not {INITIATOR}"
    )
