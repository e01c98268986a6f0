"""`remirror start` (plan/start.py): what a boot may do after a power cut, and what it leaves to apply."""

from __future__ import annotations

import dataclasses

import pytest

from remirror.facts.site import SiteFacts
from remirror.plan import make_plan
from remirror.plan import start as start_module
from remirror.plan.actions import CHANGE, DELETE, Action, Plan, PlanError, Verb
from remirror.plan.start import EXIT_HELD, HELD, MoreThanStarting, make_start, start_mirror
from remirror.protocol.commands import MdStop
from tests.unit.test_failover import PROFILE, applied
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


def test_stopping_an_array_that_runs_is_not_starting() -> None:
    facts = after_a_power_cut()
    plan = make_plan(PROFILE, facts, SECRETS)
    running = {**facts, "a": dataclasses.replace(facts["a"], inactive_arrays={})}
    with pytest.raises(MoreThanStarting, match="StopArray"):
        start_mirror(plan, running)
    stop_other = Action("a", Verb.STOP_ARRAY, "/dev/md5", DELETE, (MdStop("/dev/md5"),), repair=True)
    with pytest.raises(MoreThanStarting, match="md5"):
        start_mirror(dataclasses.replace(plan, actions=(stop_other, *plan.actions)), facts)
