"""Plan `remirror promote`: hand a mirror to another of its sites (docs/failover.md). Pure: no I/O.

Planned (the current primary is reachable and every leg in sync): the old
primary stops serving and stops the array, writes the new generation on
every leg, and logs out; the promoted site's target lets go of its leg.
`apply` with the new roles then assembles the array there from every leg
(nothing to resync) and serves it.

Forced: the promoted site fences its leg first (its target goes, with the
old primary's session), writes the new generation on its own leg only,
assembles the array from it, degraded, and serves it (CDP, export).
"""

from __future__ import annotations

from collections.abc import Mapping

from remirror.facts.site import SiteFacts
from remirror.health.state import State, assess
from remirror.plan.actions import CHANGE, CREATE, Action, Plan, PlanError, Verb
from remirror.plan.boot_arrays import release_partial_assembly
from remirror.plan.cdp import deactivation_actions
from remirror.plan.initiator import logout_actions
from remirror.plan.lio import export_removal_actions, leg_export_removal
from remirror.plan.md import assemble_steps, stop_array_action
from remirror.plan.mdadm_conf import mdadm_conf_actions, with_mdadm_conf
from remirror.plan.planner import leg_where, serving_actions
from remirror.plan.points import points_actions
from remirror.plan.teardown import refuse_if_in_use
from remirror.profile.model import Mirror, Profile
from remirror.profile.names import array_uuid, export_backstore_name, leg_device, replica_path
from remirror.protocol.steps import LegRecordPromote
from remirror.roles import Roles, as_run, leg_records, profile_as_run, roles, running_primaries


def make_promotion(
    profile: Profile,
    name: str,
    site: str,
    facts: Mapping[str, SiteFacts | None],
    secrets: Mapping[str, str],
    force: bool,
) -> Plan:
    """The hand-over of mirror `name` to `site`; PlanError when it is not safe (or not possible)."""
    home = profile.mirror(name)
    legs = home.sites
    if site not in legs:
        raise PlanError(f"{name} has no leg on site {site} (its legs: {', '.join(legs)})")
    waiting = _own_points_first(profile, home, site, facts.get(site))
    if waiting is not None and not force:
        raise PlanError(
            f"site {site}: its leg of {name} lies in its own points' volume, not active (a restart):"
            " `remirror apply` brings them back with the leg; a planned promotion needs it in sync"
        )
    if waiting is not None:
        return waiting
    uuid_ = array_uuid(profile, home)
    now = roles(home, leg_records(home, uuid_, facts))
    if now.conflict:
        raise PlanError(f"{name}: {now.conflict}")
    new = facts.get(site)
    if now.primary == site:
        if new is None or new.array_named(name, uuid_) is not None or now.generation is None:
            raise PlanError(f"{name} already runs on {site}")
        # The legs name `site` primary, but it does not run the array: a forced promotion
        # that stopped after writing the generation (its agent lost, a step failed). Retried
        # with --force, it does what is left; the generation is not written again.
        if not force:
            raise PlanError(
                f"{name}: generation {now.generation.n} names {site} primary, but {home.md_device} does"
                f" not run there (a promotion that did not finish): `remirror promote ... --site {site}"
                " --force` finishes it"
            )
        _refuse_two_primaries(name, uuid_, site, facts)
        return _finish_forced(profile, home, now, new, facts, secrets, uuid_)
    if new is None:
        raise PlanError(f"site {site} cannot be reached: a promotion runs there")
    record = now.records.get(site)
    if record is None or now.generation is None:
        raise PlanError(
            f"site {site}: its leg of {name} holds no leg record (an array made before remirror kept"
            " generations, or never built): remirror cannot tell who wrote last"
        )
    running = as_run(home, now.primary)
    if running.primary.portal is None:
        raise PlanError(
            f"{profile.where('mirrors', profile.mirrors.index(home), 'primary')}: site"
            f" {running.primary.site} has no `portal`: after the promotion its leg must serve as a"
            f" replica of {site}, reached there (add `portal: ADDRESS[:PORT]` to its leg)"
        )
    promoted = as_run(home, site)
    leg = next(r for r in running.replicas if r.site == site)
    own = leg_device(running, leg, new.dm)
    old = facts.get(now.primary)
    actions: list[Action] = []
    if force:
        _refuse_two_primaries(name, uuid_, site, facts)
        # Fence first: once the target is gone the old primary cannot write here, link or not.
        actions += leg_export_removal(profile, running, leg, new, fence=True)
        actions.append(record_action(site, [own], uuid_, site, now.generation.n, "forced", name))
    else:
        if old is None:
            raise PlanError(
                f"site {now.primary} (running {name}) cannot be reached: `--force` promotes {site} without"
                " it, fencing it off (its writes since the link was lost stay on its leg)"
            )
        if record.current.n != now.generation.n:
            raise PlanError(
                f"site {site}'s leg is behind (generation {record.current.n}, the mirror's is"
                f" {now.generation.n}): a planned promotion needs it in sync"
            )
        running_profile = profile_as_run(profile, {name: now.primary})
        health = assess(running_profile, running, facts)
        if health.state is not State.MIRRORED:
            raise PlanError(
                f"{name} is {health.state} ({health.reason}): a planned promotion needs every leg in"
                " sync; wait for it, or `--force`"
            )
        actions += stand_down(profile, running, old)
        devices = [leg_device(running, running.primary, old.dm)] + [
            replica_path(profile, running, r) for r in running.replicas
        ]
        actions.append(record_action(old.name, devices, uuid_, site, now.generation.n, "planned", name))
        actions += logout_actions(profile, running, old)
        actions += leg_export_removal(profile, running, leg, new, old.initiator or "")
    if force:
        # The array from the promoted site's own leg: the others rejoin when they return. (A
        # planned promotion leaves the assembly to `apply`, from every leg: they are in sync.)
        actions += _run_on_own_leg(profile, home, promoted, new, own, secrets, uuid_)
    return _with_conf(profile, home, site, facts, actions)


def _own_points_first(profile: Profile, home: Mirror, site: str, new: SiteFacts | None) -> Plan | None:
    """The activation of the promoted site's own points, when its leg lies in their volume and
    the stack is not active (a restart of that site; its `cdp run` activates it at its first
    tick, but a promotion may come first): md's superblock and the leg record are in the volume,
    so nothing about the leg can be decided before. The promotion is planned once it is active."""
    leg = next(leg for leg in home.legs if leg.site == site)
    disk = new.disks.get(leg.disk) if new is not None and leg.points is not None else None
    if new is None or disk is None or disk.first_sector != "cdp":
        return None  # no points, or none on the disk: the planner says what is wrong with it
    where = leg_where(profile.mirrors.index(home), home, leg)
    activation = points_actions(profile, where, home, leg, new).actions
    if not activation:
        return None  # active
    pending = f"the promotion of {home.name} to {site}, once its leg can be read"
    return Plan(tuple(activation), pending=pending)


def _run_on_own_leg(
    profile: Profile,
    home: Mirror,
    promoted: Mirror,
    new: SiteFacts,
    own: str,
    secrets: Mapping[str, str],
    uuid_: str,
) -> list[Action]:
    """The forced promotion's last part: the array assembled from the promoted site's leg, served."""
    actions: list[Action] = []
    if own in new.disks:
        actions += release_partial_assembly(new, new.disks[own], uuid_)[0]
    actions.append(assemble_action(new, home, uuid_, own))
    return actions + serving_actions(profile, profile.mirrors.index(home), promoted, new, secrets)


def _refuse_two_primaries(name: str, uuid_: str, site: str, facts: Mapping[str, SiteFacts | None]) -> None:
    """A forced promotion is refused while another site it reaches runs the array (the old
    primary's start at boot won a race with it, or it never went down; a promotion finished
    later, by a retry): two primaries would write, each on its own leg. A site it cannot reach
    is fenced instead."""
    for other, there in facts.items():
        array = there.array_named(name, uuid_) if there is not None and other != site else None
        if array is not None:
            raise PlanError(
                f"site {other} is reached and runs {name} as /dev/{array.kernel_name}: promoting"
                f" {site} by force would make two primaries. Stop it there first (what uses it,"
                f" then `mdadm --stop /dev/{array.kernel_name}`), or cut {other} off (its power, its"
                " link: a site that cannot be reached is fenced), or promote without `--force`"
                " once every leg is in sync"
            )


def _finish_forced(
    profile: Profile,
    home: Mirror,
    now: Roles,
    new: SiteFacts,
    facts: Mapping[str, SiteFacts | None],
    secrets: Mapping[str, str],
    uuid_: str,
) -> Plan:
    """What a forced promotion that wrote its generation (naming `new`) and then stopped left
    undone: the fence (if its target is still there: the site of the generation before ran the
    mirror, exporting this leg), the assembly from the site's own leg, the serving."""
    site = new.name
    record = now.records.get(site)
    before = record.generations[-2].site if record is not None and len(record.generations) > 1 else ""
    promoted = as_run(home, site)
    old_view = as_run(home, before) if before else home
    leg = next((r for r in old_view.replicas if r.site == site), None)
    own = leg_device(promoted, promoted.primary, new.dm)
    actions: list[Action] = []
    if leg is not None:
        actions += leg_export_removal(profile, old_view, leg, new, fence=True)
    actions += _run_on_own_leg(profile, home, promoted, new, own, secrets, uuid_)
    return _with_conf(profile, home, site, facts, actions)


def _with_conf(
    profile: Profile, home: Mirror, site: str, facts: Mapping[str, SiteFacts | None], actions: list[Action]
) -> Plan:
    """The promotion's actions with mdadm.conf written for the new roles on the legs' sites reached."""
    legs = home.sites
    reached = {n: f for n, f in facts.items() if f is not None}
    # Every other mirror as it runs now (a promotion elsewhere stays so in the conf it writes).
    conf = mdadm_conf_actions(
        profile_as_run(profile, {**running_primaries(profile, facts), home.name: site}), reached
    )
    return Plan(tuple(with_mdadm_conf(actions, [a for a in conf if a.site in legs])))


def record_action(
    where: str,
    devices: list[str],
    uuid_: str,
    site: str,
    after: int,
    how: str,
    name: str,
    n: int | None = None,
) -> Action:
    """A new generation naming `site` primary (number `n`, by default after + 1) on `devices`."""
    step = LegRecordPromote(tuple(devices), uuid_, site, after, how, n)
    return Action(
        where,
        Verb.RECORD_GENERATION,
        f"{name} generation {n or after + 1}: {site} primary ({how}) on {len(devices)} leg(s)",
        CHANGE,
        (step,),
    )


def stand_down(profile: Profile, running: Mirror, old: SiteFacts) -> list[Action]:
    """The old primary stops serving and stops the array (md writes out write-behind first)."""
    refuse_if_in_use(old, running, {export_backstore_name(running)})
    actions = export_removal_actions(running, old)
    actions += deactivation_actions(running, old)
    array = old.array_named(running.name, array_uuid(profile, running))
    if array is not None:
        actions.append(
            stop_array_action(
                old.name, running.md_device, f"{array.kernel_name}; handed over, the legs keep their data"
            )
        )
    return actions


def assemble_action(site: SiteFacts, mirror: Mirror, uuid_: str, own: str) -> Action:
    """The array assembled on `site` from its own leg alone (degraded until the others join).

    The leg, a replica's until now, had no bad block log (remirror.agent.md_legs); it is given
    one as the array's primary leg, the only one for now: on kernel 6.1 md never fails the last
    leg in sync, it stops every write to the array (MD_BROKEN), where with a log only the write
    its disk failed fails (docs/safety.md, "A write a leg did not take")."""
    return Action(
        site.name,
        Verb.ASSEMBLE_ARRAY,
        f"{mirror.md_device} from {own} (degraded until the other legs rejoin)",
        CREATE,
        assemble_steps(mirror, site, uuid_, [own], bad_block_log=True),
    )
