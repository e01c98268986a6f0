"""`remirror start` (plan/start.py): what a boot may do after a power cut, and what it leaves to apply."""

from __future__ import annotations

import dataclasses

import pytest

from remirror.facts.site import SiteFacts
from remirror.health import assess
from remirror.plan import make_plan
from remirror.plan import start as start_module
from remirror.plan.actions import CHANGE, DELETE, Action, Plan, PlanError, Verb
from remirror.plan.repair import make_repair
from remirror.plan.start import EXIT_HELD, HELD, MoreThanStarting, make_start, start_mirror
from remirror.profile import parse_profile
from remirror.profile.timeouts import AUTOTUNED, NOOP_TIMEOUT, TCP_WINDOW
from remirror.protocol.commands import IscsiNodeUpdate, MdStop
from tests.unit.simulated_sites import Sites
from tests.unit.test_failover import PROFILE, PROFILE_TEXT, UUID, applied
from tests.unit.test_plan_properties import SECRETS


def after_a_power_cut() -> dict[str, SiteFacts]:
    """The primary booted again: no array running, no session to the replica, and its leg taken by
    udev into an inactive md127 (as the hosts' lab saw on Debian 12)."""
    facts = applied().facts
    a = facts["a"]
    held = dataclasses.replace(a.disks["/dev/a0"], holders=("md127",))
    booted = dataclasses.replace(
        a, arrays=(), sessions=(), disks={**a.disks, "/dev/a0": held}, inactive_arrays={"md127": ("vdb",)}
    )
    return {**facts, "a": booted}


def test_after_a_power_cut_start_logs_in_stops_udev_s_partial_array_and_assembles() -> None:
    facts = after_a_power_cut()
    plan = make_start(PROFILE, facts, SECRETS)
    verbs = [(a.site, a.verb) for a in plan.actions]
    assert ("a", Verb.LOGIN_SESSION) in verbs
    assert ("a", Verb.STOP_ARRAY) in verbs
    assert verbs[-1] == ("a", Verb.ASSEMBLE_ARRAY)
    assert {verb for _, verb in verbs} == {Verb.LOGIN_SESSION, Verb.STOP_ARRAY, Verb.ASSEMBLE_ARRAY}
    assert plan.notes == ()


def test_start_does_nothing_while_the_mirrors_run_whatever_else_apply_would_change() -> None:
    facts = applied().facts
    assert make_start(PROFILE, facts, SECRETS).is_empty
    edited = Plan((Action("a", Verb.SET_WRITE_MOSTLY, "/dev/md/m0 leg b", CHANGE),))
    assert start_mirror(edited, facts).is_empty


def test_a_plan_that_holds_more_than_starting_is_left_for_apply() -> None:
    facts = after_a_power_cut()
    plan = make_plan(PROFILE, facts, SECRETS)
    for more in (Verb.SET_WRITE_MOSTLY, Verb.CREATE_CACHE, Verb.REBUILD_LEG):
        edited = dataclasses.replace(plan, actions=(Action("a", more, "/dev/a0", CHANGE), *plan.actions))
        with pytest.raises(MoreThanStarting, match=str(more)) as refused:
            start_mirror(edited, facts)
        assert refused.value.exit_code == EXIT_HELD  # the unit does not retry it


def test_a_mirror_its_plan_refuses_is_held_and_named_while_the_others_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def split_brain(*_args: object) -> Plan:
        raise PlanError("mirror m0 is in split brain: ...")

    monkeypatch.setattr(start_module, "make_plan", split_brain)
    plan = make_start(PROFILE, after_a_power_cut(), SECRETS)
    assert plan.is_empty
    assert plan.notes == (f"{HELD}: m0: mirror m0 is in split brain: ...",)
    assert plan.summary() == "No changes."  # not "the sites match the profile"


def test_stopping_an_array_that_runs_is_not_starting() -> None:
    facts = after_a_power_cut()
    plan = make_plan(PROFILE, facts, SECRETS)
    running = {**facts, "a": dataclasses.replace(facts["a"], inactive_arrays={})}
    with pytest.raises(MoreThanStarting, match="StopArray"):
        start_mirror(plan, running)
    stop_other = Action("a", Verb.STOP_ARRAY, "/dev/md5", DELETE, (MdStop("/dev/md5"),), repair=True)
    with pytest.raises(MoreThanStarting, match="md5"):
        start_mirror(dataclasses.replace(plan, actions=(stop_other, *plan.actions)), facts)


def both_after_a_site_wide_outage() -> dict[str, SiteFacts]:
    """Both sites booted again: the primary as after its power cut; at the DR site, Debian's target
    service restored the target and its ACL from what remirror's rtslib saved, but not the
    storage object (rtslib 2.1.75 refuses its `exclusive`), so neither the LUN nor the ACL's
    mapping of it (as the hosts' lab saw on Debian 12)."""
    facts = after_a_power_cut()
    b = facts["b"]
    ((iqn, target),) = b.targets.items()
    unmapped = {name: dataclasses.replace(acl, mapped_luns=()) for name, acl in target.acls.items()}
    restored = dataclasses.replace(target, luns={}, acls=unmapped)
    return {**facts, "b": dataclasses.replace(b, backstores={}, targets={iqn: restored}, sessions=())}


def test_after_both_sites_power_cut_start_completes_the_dr_site_s_half_restored_export() -> None:
    plan = make_start(PROFILE, both_after_a_site_wide_outage(), SECRETS)
    verbs = [(a.site, a.verb) for a in plan.actions]
    assert plan.notes == ()
    for made in (Verb.CREATE_BACKSTORE, Verb.CREATE_LUN, Verb.UPDATE_NODE_ACL):
        assert ("b", made) in verbs
    assert verbs[-1] == ("a", Verb.ASSEMBLE_ARRAY)


def with_other_chap(facts: dict[str, SiteFacts]) -> dict[str, SiteFacts]:
    """The DR site's ACL with another CHAP password than the profile's."""
    b = facts["b"]
    ((iqn, target),) = b.targets.items()
    other = {name: dataclasses.replace(acl, chap_password="another") for name, acl in target.acls.items()}
    return {**facts, "b": dataclasses.replace(b, targets={iqn: dataclasses.replace(target, acls=other)})}


def test_an_acl_with_its_lun_and_other_chap_is_a_profile_edit_held_for_apply() -> None:
    plan = make_start(PROFILE, with_other_chap(after_a_power_cut()), SECRETS)
    assert plan.is_empty
    (note,) = plan.notes
    assert note.startswith(f"{HELD}: m0: starting it would also take `~ b: UpdateNodeAcl "), note


def started_misnamed(array_state: str) -> dict[str, SiteFacts]:
    """The primary after a clean reboot in which its replica's session ended first: its own leg,
    all the array then expected, started by early boot as md127 (`/dev/md/m0_0`), and
    `/dev/md/m0` absent (as the hosts' lab saw on Debian 12)."""
    facts = applied().facts
    a = facts["a"]
    (array,) = a.arrays
    booted = dataclasses.replace(array, array_state=array_state, degraded=1)
    return {
        **facts,
        "a": dataclasses.replace(a, arrays=(booted,), array_links={"md127": ("m0_0",)}, sessions=()),
    }


def test_an_array_boot_started_under_another_name_and_never_written_is_assembled_again_under_its_own() -> (
    None
):
    plan = make_start(PROFILE, started_misnamed("read-auto"), SECRETS)
    lines = [a.line() for a in plan.actions]
    assert plan.notes == ()
    # Stopped before the replica's login: nothing of it near what boot started.
    assert [(a.site, a.verb) for a in plan.actions] == [
        ("a", Verb.STOP_ARRAY),
        ("a", Verb.LOGIN_SESSION),
        ("a", Verb.ASSEMBLE_ARRAY),
    ]
    assert lines[0].startswith("- a: StopArray /dev/md127 (mirror m0's, started at boot under another name")
    assert lines[-1] == "+ a: AssembleArray /dev/md/m0 from /dev/a0 and 1 replica(s)"
    # Start stops it only in the plan that assembles it again.
    without = dataclasses.replace(plan, actions=plan.actions[:2], pending="the assembly")
    with pytest.raises(MoreThanStarting, match="StopArray /dev/md127"):
        start_mirror(without, started_misnamed("read-auto"))


def test_the_reconciler_leaves_an_array_running_under_another_name_to_start_and_apply() -> None:
    facts = started_misnamed("read-auto")
    mirror = PROFILE.mirrors[0]
    repair = make_repair(PROFILE, mirror, facts, SECRETS, assess(PROFILE, mirror, facts))
    assert repair.actions == ()
    assert repair.blocked == (
        "/dev/md/m0 runs as /dev/md127 (read-auto): `remirror start` or `remirror apply` assembles it"
        " again under its name"
    )


def test_an_array_running_under_another_name_and_written_is_left_to_an_operator() -> None:
    plan = make_start(PROFILE, started_misnamed("clean"), SECRETS)
    assert plan.is_empty
    assert plan.notes == (
        f"{HELD}: m0: site a: mirror m0's array runs as /dev/md127, not /dev/md/m0, and has been"
        " written as such (clean): stop what uses it and the array (mdadm --stop /dev/md127), then apply",
    )
    with pytest.raises(PlanError, match="runs as /dev/md127"):
        make_plan(PROFILE, started_misnamed("clean"), SECRETS)


def test_an_acl_restored_without_its_lun_but_with_other_chap_is_held_for_apply() -> None:
    (note,) = make_start(PROFILE, with_other_chap(both_after_a_site_wide_outage()), SECRETS).notes
    assert "UpdateNodeAcl" in note, note


def test_a_new_acl_on_a_target_that_stayed_is_held_and_one_on_a_target_made_again_is_not() -> None:
    facts = both_after_a_site_wide_outage()
    b = facts["b"]
    ((iqn, target),) = b.targets.items()
    without = {**facts, "b": dataclasses.replace(b, targets={iqn: dataclasses.replace(target, acls={})})}
    (note,) = make_start(PROFILE, without, SECRETS).notes
    assert "CreateNodeAcl" in note, note
    nothing = {**facts, "b": dataclasses.replace(b, targets={})}
    made = make_start(PROFILE, nothing, SECRETS)
    assert made.notes == ()
    assert {Verb.CREATE_TARGET, Verb.CREATE_NODE_ACL} <= {a.verb for a in made.actions}


def test_an_old_primary_booting_after_its_dr_site_s_promotion_starts_nothing_and_says_why() -> None:
    # Site a's power came back after site b was promoted by force (the hosts' lab): its own
    # profile still names it primary; the legs' records name b, which runs the mirror.
    from remirror.plan.promote import make_promotion
    from remirror.plan.start import promoted_elsewhere
    from remirror.roles import leg_records, profile_as_run, roles

    sites = applied()
    sites.run(make_promotion(PROFILE, "m0", "b", {**sites.facts, "a": None}, SECRETS, force=True))
    booted = {**sites.facts, "a": dataclasses.replace(sites.facts["a"], arrays=(), sessions=())}
    mirror = PROFILE.mirrors[0]
    running = profile_as_run(PROFILE, {"m0": roles(mirror, leg_records(mirror, UUID, booted)).primary})
    assert running.mirrors[0].primary.site == "b"
    assert make_start(running, booted, SECRETS).actions == ()  # b runs it: nothing to start
    (note,) = promoted_elsewhere(PROFILE, running)
    assert note.startswith("m0 runs at b (promoted there"), note
    assert promoted_elsewhere(PROFILE, PROFILE) == ()


def stopped_cleanly(site: SiteFacts, path: str) -> SiteFacts:
    """`site` with the leg on `path` marked clean in its superblock (`State : clean`)."""
    leg = site.disks[path]
    assert leg.superblock is not None
    clean = dataclasses.replace(leg, superblock=dataclasses.replace(leg.superblock, clean=True))
    return dataclasses.replace(site, disks={**site.disks, path: clean})


def test_a_boot_assembles_the_mirror_only_at_the_booting_host() -> None:
    # Site b was promoted and its operator stopped the array there; site a's boot plans with b
    # primary (the legs' records), and would assemble b's array from a's boot: b's to start.
    from remirror.plan.promote import make_promotion
    from remirror.roles import profile_as_run

    sites = applied()
    sites.run(make_promotion(PROFILE, "m0", "b", {**sites.facts, "a": None}, SECRETS, force=True))
    stopped = {**sites.facts, "b": dataclasses.replace(sites.facts["b"], arrays=())}
    stopped["a"] = stopped_cleanly(stopped["a"], "/dev/a0")  # else: a split brain (test_forced_rejoin)
    plan = make_plan(profile_as_run(PROFILE, {"m0": "b"}), stopped, SECRETS)
    assemble = Plan(tuple(a for a in plan.actions if a.verb == Verb.ASSEMBLE_ARRAY))
    assert [a.site for a in assemble.actions] == ["b"]
    with pytest.raises(MoreThanStarting, match="assemble the mirror at b, not here"):
        start_mirror(assemble, stopped, frozenset({"a"}))
    assert start_mirror(assemble, stopped, frozenset({"b"})) == assemble  # at b's own boot
    held = make_start(profile_as_run(PROFILE, {"m0": "b"}), stopped, SECRETS, configured=PROFILE)
    assert held.actions == (), held  # from a (local in PROFILE): held, and named
    assert held.notes[0].startswith(f"{HELD}: m0: "), held.notes


# The DR site's own view of the profile: itself local, the primary over SSH.
DR_VIEW = parse_profile(
    PROFILE_TEXT.replace("a: {host: local}", "a: {host: ssh://root@a}").replace(
        "b: {host: ssh://root@b}", "b: {host: local}"
    )
)


def the_dr_site_booted(facts: dict[str, SiteFacts], restored: bool = True) -> dict[str, SiteFacts]:
    """The DR site after its power cut (as the hosts' lab saw on Debian 12): its replica disk
    taken by the initramfs into an inactive md127, and of its export what Debian's target
    service restored: the target and its ACL without the LUN (`restored`), or nothing."""
    b = facts["b"]
    ((iqn, target),) = b.targets.items()
    unmapped = {name: dataclasses.replace(acl, mapped_luns=()) for name, acl in target.acls.items()}
    targets = {iqn: dataclasses.replace(target, luns={}, acls=unmapped)} if restored else {}
    held = dataclasses.replace(b.disks["/dev/b0"], holders=("md127",))
    booted = dataclasses.replace(
        b,
        targets=targets,
        backstores={},
        disks={**b.disks, "/dev/b0": held},
        inactive_arrays={"md127": ("vdb",)},
        sessions=(),
    )
    return {**facts, "b": booted}


def test_the_dr_site_s_boot_makes_its_own_export_again_and_leaves_the_rest_to_the_primary() -> None:
    for facts in (the_dr_site_booted(applied().facts), the_dr_site_booted(after_a_power_cut())):
        plan = make_start(DR_VIEW, facts, SECRETS, configured=DR_VIEW)
        assert plan.notes == (), plan.notes
        verbs = [(a.site, a.verb) for a in plan.actions]
        # Only the DR site's own part: the partial array stopped before its disk is exported.
        assert {site for site, _ in verbs} == {"b"}, verbs
        assert verbs[0] == ("b", Verb.STOP_ARRAY)
        assert {Verb.CREATE_BACKSTORE, Verb.CREATE_LUN, Verb.SAVE_LIO_CONFIG} <= {v for _, v in verbs}
        # Its ACL with the CHAP LIO has (here the same secrets as the primary's): mapped again.
        assert ("b", Verb.UPDATE_NODE_ACL) in verbs
    # Both sites booted: the assembly at the primary is in the mirror's plan, for its own start.
    assert ("a", Verb.ASSEMBLE_ARRAY) in [
        (a.site, a.verb) for a in make_plan(DR_VIEW, facts, SECRETS).actions
    ]


def test_a_target_its_service_did_not_restore_is_left_to_the_primary_with_its_acl() -> None:
    # Made here, its ACL would carry this site's guess of the CHAP (its own generated secret):
    # the primary's start or reconciler makes the target again, the ACL with it.
    plan = make_start(
        DR_VIEW, the_dr_site_booted(applied().facts, restored=False), SECRETS, configured=DR_VIEW
    )
    verbs = [(a.site, a.verb) for a in plan.actions]
    assert verbs == [("b", Verb.STOP_ARRAY), ("b", Verb.CREATE_BACKSTORE), ("b", Verb.SAVE_LIO_CONFIG)], verbs


def test_the_dr_site_s_boot_holds_its_mirror_when_its_own_part_is_more_than_starting() -> None:
    facts = the_dr_site_booted(applied().facts)
    plan = make_plan(DR_VIEW, facts, SECRETS)
    edited = dataclasses.replace(
        plan, actions=(Action("b", Verb.WRITE_MDADM_CONF, "/etc/mdadm/mdadm.conf", CHANGE), *plan.actions)
    )
    with pytest.raises(MoreThanStarting, match="its export here would also take"):
        start_module.start_replica_site(edited, facts, frozenset({"b"}))
    # What is the primary's (here, a leg to rebuild there) is left to it, not held.
    primary_s = dataclasses.replace(
        plan, actions=(Action("a", Verb.REBUILD_LEG, "/dev/md/m0", CHANGE), *plan.actions)
    )
    assert all(
        a.site == "b" for a in start_module.start_replica_site(primary_s, facts, frozenset({"b"})).actions
    )


def test_an_old_primary_s_boot_after_its_dr_site_s_promotion_starts_no_export_of_its_leg() -> None:
    from remirror.plan.promote import make_promotion
    from remirror.roles import profile_as_run

    sites = applied()
    sites.run(make_promotion(PROFILE, "m0", "b", {**sites.facts, "a": None}, SECRETS, force=True))
    running = profile_as_run(PROFILE, {"m0": "b"})
    booted = after_a_power_cut()
    facts = {**sites.facts, "a": booted["a"]}
    # As the legs' records say, a's leg is b's replica now; but the profile has a primary, and
    # what becomes of a's leg (taken back, or split brain) is the new primary's to judge.
    started = make_start(running, facts, SECRETS, configured=PROFILE)
    assert (started.actions, started.notes) == ((), ())  # nothing to do, and nothing held


def test_the_dr_site_s_start_is_done_once_it_has_made_its_part_and_does_not_run_again() -> None:
    # The ACL left to the primary must not leave a save of LIO's configuration behind it, or
    # every start would find something left and the unit would try again forever.
    facts = with_other_chap(the_dr_site_booted(applied().facts))
    plan = make_start(DR_VIEW, facts, SECRETS, configured=DR_VIEW)
    sites = Sites(facts)
    sites.run(Plan(tuple(a for a in plan.actions if a.verb != Verb.STOP_ARRAY)))
    b = sites.facts["b"]  # md127 stopped, as `mdadm --stop` would
    freed = dataclasses.replace(b.disks["/dev/b0"], holders=())
    sites.facts["b"] = dataclasses.replace(b, inactive_arrays={}, disks={**b.disks, "/dev/b0": freed})
    again = make_start(DR_VIEW, sites.facts, SECRETS, configured=DR_VIEW)
    assert again.actions == (), again.actions
    assert make_plan(DR_VIEW, sites.facts, SECRETS).actions  # the ACL: the primary's to do


def test_the_dr_site_s_boot_leaves_an_acl_with_other_chap_to_the_primary_and_makes_the_rest() -> None:
    # Debian's target service restored the target and its ACL (the primary's CHAP, no LUN); the
    # DR site's own controller holds other generated secrets: it makes the LUN, not the ACL.
    facts = both_after_a_site_wide_outage()
    b = facts["b"]
    lio_only = {
        **facts,
        "b": dataclasses.replace(
            b,
            inactive_arrays={"md127": ("vdb",)},
            disks={**b.disks, "/dev/b0": dataclasses.replace(b.disks["/dev/b0"], holders=("md127",))},
        ),
    }
    plan = make_start(DR_VIEW, with_other_chap(lio_only), SECRETS, configured=DR_VIEW)
    assert plan.notes == (), plan.notes
    verbs = [(a.site, a.verb) for a in plan.actions]
    assert verbs[0] == ("b", Verb.STOP_ARRAY)
    assert ("b", Verb.CREATE_LUN) in verbs
    assert not any(verb in (Verb.CREATE_NODE_ACL, Verb.UPDATE_NODE_ACL) for _, verb in verbs), verbs
    # With the profile's CHAP (the same secret deployed at both sites), it maps the LUN too.
    same = make_start(DR_VIEW, lio_only, SECRETS, configured=DR_VIEW)
    assert ("b", Verb.UPDATE_NODE_ACL) in [(a.site, a.verb) for a in same.actions]


def test_a_dr_site_does_not_start_as_primary_on_another_site_s_leg_s_word() -> None:
    # A generation naming b written on a's leg alone (by whoever holds site a): b's boot holds
    # the mirror rather than run it; a promotion writes b's own leg first.
    from remirror.roles import profile_as_run

    facts = the_dr_site_booted(applied().facts)
    a = facts["a"]
    record = a.disks["/dev/a0"].leg_record
    assert record is not None
    forged = dataclasses.replace(a.disks["/dev/a0"], leg_record=record.then("b", 9.0, "planned"))
    facts = {**facts, "a": dataclasses.replace(a, disks={**a.disks, "/dev/a0": forged})}
    plan = make_start(profile_as_run(DR_VIEW, {"m0": "b"}), facts, SECRETS, configured=DR_VIEW)
    assert plan.actions == ()
    assert plan.notes[0].startswith(f"{HELD}: m0: the legs' records make b its primary, but not b's own leg")


def with_old_window(facts: dict[str, SiteFacts]) -> dict[str, SiteFacts]:
    """The primary's node records as an older remirror left them: open-iscsi's fixed 512 KiB window."""
    a = facts["a"]
    nodes = {key: {**record, TCP_WINDOW: "524288"} for key, record in a.nodes.items()}
    return {**facts, "a": dataclasses.replace(a, nodes=nodes)}


def test_an_upgrade_s_new_tcp_window_neither_fails_a_healthy_leg_nor_holds_a_boot() -> None:
    # The reconciler updates the record and leaves the session be: it takes the window at its
    # next login (TRANSPORT_KEYS); a logout would fail the leg under md for a bitmap resync.
    facts = with_old_window(applied().facts)
    mirror = PROFILE.mirrors[0]
    upgraded = make_repair(PROFILE, mirror, facts, SECRETS, assess(PROFILE, mirror, facts))
    assert [(a.site, a.verb) for a in upgraded.actions] == [("a", Verb.UPDATE_ISCSI_NODE)]
    assert TCP_WINDOW.removeprefix("node.") in upgraded.actions[0].subject
    # A boot right after the upgrade starts the mirror, its record updated on the way.
    booted = make_start(PROFILE, with_old_window(after_a_power_cut()), SECRETS)
    assert booted.notes == ()
    assert Verb.UPDATE_ISCSI_NODE in {a.verb for a in booted.actions}
    assert booted.actions[-1].verb == Verb.ASSEMBLE_ARRAY


def test_a_boot_still_holds_a_node_record_s_timeouts_a_profile_edit_changed() -> None:
    facts = after_a_power_cut()
    a = facts["a"]
    nodes = {key: {**record, "node.conn[0].timeo.noop_out_timeout": "120"} for key, record in a.nodes.items()}
    plan = make_start(PROFILE, {**facts, "a": dataclasses.replace(a, nodes=nodes)}, SECRETS)
    assert not plan.actions
    assert any(HELD in note and "UpdateIscsiNode" in note for note in plan.notes), plan.notes


def test_a_boot_puts_back_the_safe_mode_md_forgot_at_an_assembly() -> None:
    # udev's or mdadm's assembly leaves md's 0.2 s (remirror.plan.safe_mode): its repair starts.
    facts = after_a_power_cut()
    plan = make_plan(PROFILE, facts, SECRETS)
    repair = Action("a", Verb.SET_SAFE_MODE, "/dev/md/m0 safe mode 0.204s -> 10s", CHANGE, repair=True)
    started = start_mirror(dataclasses.replace(plan, actions=(*plan.actions, repair)), facts)
    assert repair in started.actions


def test_a_boot_updates_only_the_window_this_version_sets_and_nothing_beside_it() -> None:
    facts = with_old_window(after_a_power_cut())
    plan = make_plan(PROFILE, facts, SECRETS)

    def update(**settings: str) -> Action:
        return Action(
            "a",
            Verb.UPDATE_ISCSI_NODE,
            "node record",
            CHANGE,
            (IscsiNodeUpdate("iqn.2026-11.org.example:m0", "192.0.2.2", 3260, settings),),
        )

    def start_with(action: Action) -> Plan:
        return start_mirror(dataclasses.replace(plan, actions=(action, *plan.actions)), facts)

    assert update(**{TCP_WINDOW: AUTOTUNED}) in start_with(update(**{TCP_WINDOW: AUTOTUNED})).actions
    for held in (
        update(**{TCP_WINDOW: "524288"}),  # a custom mapping's window: a profile edit, apply's
        update(**{TCP_WINDOW: AUTOTUNED, NOOP_TIMEOUT: "120"}),  # a timeout beside it
        update(**{NOOP_TIMEOUT: "120"}),
    ):
        with pytest.raises(MoreThanStarting, match="UpdateIscsiNode"):
            start_with(held)
