"""Plan `remirror resolve`: end a split brain by keeping one side (docs/failover.md). Pure: no I/O.

The command is the operator's consent to lose the other side's writes since
the split, so its plan is destructive by nature. In three parts, each
planned on what the previous left:

1. `make_resolution`: each discarded leg's site stops serving and stops the
   array if it runs it, optionally saves the ranges its bitmap marks dirty
   (what it wrote on its own) to a directory on that site, and forgets the
   array (`mdadm --zero-superblock`: its leg record no longer counts either).
   The kept site becomes primary by a new generation if it was not, and
   assembles the array from its own leg if it does not run it.
2. `apply` with the roles the legs now say: the discarded legs exported to
   the kept site, sessions, write-mostly.
3. `rebuild_actions`: the discarded legs added back in full (remirror.agent.md_legs):
   its bitmap cannot say what differs, so everything is copied from the
   kept side; then it joins the kept side's generation.
"""

from __future__ import annotations

from collections.abc import Mapping

from remirror.facts.generations import SAVED_DIR
from remirror.facts.site import SiteFacts
from remirror.health.state import IN_SYNC, INCOMPLETE, State, assess
from remirror.plan.actions import CHANGE, CREATE, DELETE, Action, Plan, PlanError, Verb
from remirror.plan.initiator import logout_actions
from remirror.plan.lio import leg_export_removal
from remirror.plan.mdadm_conf import mdadm_conf_actions, with_mdadm_conf
from remirror.plan.promote import assemble_action, record_action, stand_down
from remirror.profile.model import Mirror, Profile, ReplicaLeg
from remirror.profile.names import array_uuid, leg_device, replica_path
from remirror.protocol.commands import MdZeroSuperblock
from remirror.protocol.steps import AddReplicaLegs, LegRecordJoin, SaveRanges
from remirror.roles import as_run, leg_records, profile_as_run, roles, running_primaries


def make_resolution(
    profile: Profile,
    name: str,
    keep: str,
    facts: Mapping[str, SiteFacts | None],
    save: str | None,
) -> Plan:
    """Part 1: the discarded legs let go of the array; `keep` runs it. PlanError when it cannot."""
    home = profile.mirror(name)
    legs = home.legs
    sites = [leg.site for leg in legs]
    if keep not in sites:
        raise PlanError(f"{name} has no leg on site {keep} (its legs: {', '.join(sites)})")
    unreached = [s for s in sites if facts.get(s) is None]
    if unreached:
        raise PlanError(
            f"site {', '.join(unreached)} cannot be reached: resolving needs every site of {name}"
        )
    reached = {s: f for s, f in facts.items() if f is not None}
    uuid_ = array_uuid(profile, home)
    now = roles(home, leg_records(home, uuid_, facts))
    running = as_run(home, now.primary)
    health = assess(profile_as_run(profile, {name: now.primary}), running, facts)
    if health.state is not State.SPLIT_BRAIN:
        raise PlanError(f"{name} is {health.state}, not in split brain: nothing to resolve ({health.reason})")
    kept = as_run(home, keep)
    kept_site = reached[keep]
    # Legs in the kept side's running array stay; every other leg is discarded. The kept side's
    # own leg always stays: when the legs' generations conflict, assess reports no legs at all.
    array = kept_site.array_named(name, uuid_) if keep == now.primary else None
    members = {keep}
    if array is not None:
        members |= {leg.site for leg in health.legs if leg.status in (IN_SYNC, INCOMPLETE)}
    everyone = kept.legs
    discarded = [leg for leg in everyone if leg.site not in members]
    actions: list[Action] = []
    for leg in discarded:
        site = reached[leg.site]
        own = leg_device(home, leg, site.dm)
        theirs = as_run(home, leg.site)
        if site.array_named(name, uuid_) is not None and _runs_on(site, name, uuid_, own):
            actions += stand_down(profile, theirs, site)
        actions += logout_actions(profile, theirs, site)
        if isinstance(leg, ReplicaLeg):
            # Exported to the kept side: LIO holds the disk (md cannot forget it under LIO) and the
            # kept side's session to it goes first. `apply` exports it again afterwards.
            alone = kept.model_copy(update={"replicas": [leg]})
            actions += logout_actions(profile, alone, kept_site)
            actions += leg_export_removal(profile, kept, leg, site, kept_site.initiator or "")
        if save:
            step = SaveRanges(own, save, name, leg.site)
            where = f"{SAVED_DIR}/{save}"
            actions.append(
                Action(leg.site, Verb.SAVE_RANGES, f"what {own} wrote on its own -> {where}", CREATE, (step,))
            )
        actions.append(
            Action(
                leg.site,
                Verb.FORGET_ARRAY,
                f"{own} (mdadm --zero-superblock: {leg.site}'s writes since the split are discarded;"
                f" {keep} copies the whole leg back)",
                DELETE,
                (MdZeroSuperblock(own),),
                destructive=f"the writes on {leg.site}'s leg {own} since the split brain",
            )
        )
    if keep != now.primary:
        own = leg_device(home, kept.primary, kept_site.dm)
        known = now.records.get(keep)
        if known is None:
            raise PlanError(f"site {keep}: its leg of {name} holds no leg record: it cannot be kept")
        newest = max(r.current.n for r in now.records.values() if r is not None)
        actions.append(record_action(keep, [own], uuid_, keep, known.current.n, "resolve", name, newest + 1))
    if kept_site.array_named(name, uuid_) is None:
        own = leg_device(home, kept.primary, kept_site.dm)
        actions.append(assemble_action(kept_site, home, uuid_, own))
    # Every other mirror as it runs now (a promotion elsewhere stays so in the conf it writes).
    conf = mdadm_conf_actions(
        profile_as_run(profile, {**running_primaries(profile, facts), name: keep}), reached
    )
    return Plan(tuple(with_mdadm_conf(actions, [a for a in conf if a.site in sites])))


def rebuild_actions(profile: Profile, running: Mirror, facts: Mapping[str, SiteFacts]) -> list[Action]:
    """Part 3: each replica leg that carries no superblock of the array (forgotten in part 1) is
    added back in full, then joins the array's generation."""
    primary = facts[running.primary.site]
    uuid_ = array_uuid(profile, running)
    if primary.array_named(running.name, uuid_) is None:
        return []
    paths = []
    for replica in running.replicas:
        path = replica_path(profile, running, replica)
        disk = primary.disks.get(path)
        if disk is None or not disk.exists or disk.offline:
            raise PlanError(f"{path} ({replica.site}'s leg) is not there: the rebuild waits for it")
        if disk.superblock is None:
            paths.append(path)
    if not paths:
        return []
    # All at once: their first recovery is one copy (remirror.agent.md_legs adds legs to an
    # idle array), each leg without md's bad block log, as a new array's.
    source = leg_device(running, running.primary, primary.dm)
    return [
        Action(
            primary.name,
            Verb.REBUILD_LEG,
            f"{', '.join(paths)} into {running.md_device} (in full: their own writes were discarded)",
            CHANGE,
            (
                AddReplicaLegs(running.md_device, tuple(paths)),
                *(LegRecordJoin(source, path) for path in paths),
            ),
        )
    ]


def _runs_on(site: SiteFacts, name: str, uuid_: str, leg: str) -> bool:
    """Whether the array running on `site` is on its own leg (the lab's sites share one kernel)."""
    array = site.array_named(name, uuid_)
    disk = site.disks.get(leg)
    return array is not None and disk is not None and array.member(disk.kernel_name) is not None
