"""What a boot may do: start the mirrors that were running, as `apply` would assemble them. Pure.

After a power cut the primary's own leg is not running: Debian's initramfs (or udev) takes it
into an inactive array, as md127, and nothing at boot starts an array whose partner is at
another site (docs/safety.md, "Boot"). `remirror start` (the unit remirror-start@) plans each
mirror as `apply` would, alone, and carries out a mirror's plan only when it holds nothing but
starting it: log in to the replicas, stop what udev assembled in part, make a DR site's LIO
export again after its boot, assemble, activate a CDP or points stack that exists. Anything
more (a profile edit nobody applied, a leg to rebuild, a cache to make again, a disk to write
over) is `apply`'s, with an operator: that mirror is held, and the others are started. A
split brain stops a mirror's plan itself; an unreachable site stops the whole pass (the unit
tries again). At a site that holds only a replica of a mirror, start carries out that site's own
part of the plan (its export made again, its points' stack activated) and leaves the rest to the
primary's start and reconciler.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from remirror.errors import Refusal
from remirror.facts.site import SiteFacts
from remirror.plan.actions import Action, Plan, PlanError, Verb
from remirror.plan.lio import acl_chap_as_seen
from remirror.plan.planner import make_plan
from remirror.profile.model import Mirror, Profile
from remirror.profile.names import array_uuid
from remirror.profile.timeouts import TRANSPORT_DEFAULTS
from remirror.protocol.commands import DmCreate, IscsiNodeUpdate, MdStop, ZeroHead
from remirror.protocol.lio import LioSetAcl
from remirror.roles import leg_records

# An allow-list, not "what the reconciler may do". A leg's cache made again is allowed apart
# (_adopts_a_writecache): only a writecache whose superblock its fast disk holds.
STARTING = frozenset(
    {
        Verb.LOGIN_SESSION,
        Verb.LOGIN_AFRESH,
        Verb.ASSEMBLE_ARRAY,
        Verb.ACTIVATE_CDP,
        Verb.ACTIVATE_POINTS,
        # A DR site's export, made again after its boot (its target service may not restore it).
        Verb.CREATE_BACKSTORE,
        Verb.CREATE_TARGET,
        Verb.CREATE_PORTAL,
        Verb.CREATE_LUN,
        Verb.SAVE_LIO_CONFIG,
        Verb.SET_TUNNEL,
        # What md forgets at an assembly (udev's or initramfs's), put back.
        Verb.SET_SAFE_MODE,
    }
)
HELD = "held for `remirror apply`"
EXIT_HELD = 4  # not 1: the unit does not try again what waits for an operator


class MoreThanStarting(PlanError, Refusal):
    """The plan that would start a mirror holds more than starting it: left for `apply`."""

    reason = "more_than_starting"
    exit_code = EXIT_HELD


def _restores_an_acl(action: Action, site: SiteFacts, plan: Plan) -> bool:
    """An ACL made again, not changed: on a target this plan makes again, or an ACL the site's
    LIO has without its LUN and with the CHAP the step sets (Debian's target service restores
    the ACL, not the LUN, from what remirror's rtslib saved). A new ACL on a target that stayed,
    or other CHAP, is a profile edit nobody applied: `apply`'s."""
    steps = [s for s in action.steps if isinstance(s, LioSetAcl)]
    if not steps or len(steps) != len(action.steps):
        return False
    made = {(a.site, a.target) for a in plan.actions if a.verb == Verb.CREATE_TARGET}
    for step in steps:
        target = site.targets.get(step.iqn)
        acl = target.acls.get(step.initiator) if target is not None else None
        if acl is None:
            if (action.site, step.iqn) not in made:
                return False
        elif step.lun in acl.mapped_luns or acl_chap_as_seen(step.chap) != acl.chap:
            return False
    return True


def _adopts_a_writecache(action: Action, site: SiteFacts) -> bool:
    """A leg's writecache made again over a fast disk that holds a writecache superblock (this
    leg's, from before the boot: the profile names that fast disk for this leg), zeroing nothing:
    dm-writecache adopts the superblock and the blocks the cache holds. Over a blank fast disk
    it would start an empty cache in front of a disk that lacks what the lost one held: never
    at boot (`apply`'s, with an operator)."""
    creates = [s for s in action.steps if isinstance(s, DmCreate)]
    if action.destructive or any(isinstance(s, ZeroHead) for s in action.steps) or len(creates) != 1:
        return False
    table = creates[0].table
    fast = site.disks.get(table.devices[1]) if table.target == "writecache" else None
    return fast is not None and fast.first_sector == "writecache"


def _updates_only_the_transport(action: Action) -> bool:
    """A node record brought to what this version sets on every record whatever the profile
    says (TRANSPORT_DEFAULTS: TCP's autotuned buffers, after an upgrade), nothing a profile edit
    would change: no timeout, no CHAP, no other window (a custom mapping's, `apply`'s)."""
    return bool(action.steps) and all(
        isinstance(step, IscsiNodeUpdate) and step.settings.items() <= TRANSPORT_DEFAULTS.items()
        for step in action.steps
    )


def _never_written(kernel_name: str, site: SiteFacts) -> bool:
    """An array udev assembled in part (inactive), or one started at boot that nothing has
    written since (auto-read-only): stopping it loses no write."""
    if kernel_name in site.inactive_arrays:
        return True
    return any(a.kernel_name == kernel_name and a.array_state == "read-auto" for a in site.arrays)


def _stops_only_unwritten(action: Action, site: SiteFacts, plan: Plan) -> bool:
    """A stop of arrays udev assembled in part (a repair), or of the mirror's array that boot
    started under another name, in the plan that assembles it again at that site."""
    if not action.steps or not all(isinstance(s, MdStop) for s in action.steps):
        return False
    names = [Path(s.md).name for s in action.steps if isinstance(s, MdStop)]
    if action.repair:
        return all(name in site.inactive_arrays for name in names)
    # ... or that makes its leg's cache again there first (the assembly is the plan after it).
    again = (Verb.ASSEMBLE_ARRAY, Verb.CREATE_CACHE)
    assembles = any(a.verb in again and a.site == action.site for a in plan.actions)
    return assembles and all(_never_written(name, site) for name in names)


def _allowed(action: Action, facts: Mapping[str, SiteFacts], plan: Plan) -> bool:
    """Starting, a stop only of arrays never written, or an ACL made again; never a destructive
    action."""
    if action.destructive:
        return False
    if action.verb in STARTING:
        return True
    site = facts.get(action.site)
    if site is None:
        return False
    if action.verb in (Verb.CREATE_NODE_ACL, Verb.UPDATE_NODE_ACL):
        return _restores_an_acl(action, site, plan)
    if action.verb == Verb.CREATE_CACHE:
        return _adopts_a_writecache(action, site)
    if action.verb == Verb.UPDATE_ISCSI_NODE:
        return _updates_only_the_transport(action)
    return action.verb == Verb.STOP_ARRAY and _stops_only_unwritten(action, site, plan)


def start_mirror(plan: Plan, facts: Mapping[str, SiteFacts], here: frozenset[str] | None = None) -> Plan:
    """One mirror's plan to carry out at boot: empty when it needs no assembling and waits for
    nothing (the reconciler does the rest), the plan when it only starts the mirror; else
    MoreThanStarting naming the first action that is more."""
    if not plan.pending and not any(a.verb == Verb.ASSEMBLE_ARRAY for a in plan.actions):
        return Plan(())
    for action in plan.actions:
        if here is not None and action.verb == Verb.ASSEMBLE_ARRAY and action.site not in here:
            # A boot starts what runs at the booting host: an array at another site (one its
            # operator stopped there, at a DR site promoted meanwhile) is that site's to start.
            raise MoreThanStarting(
                f"it would assemble the mirror at {action.site}, not here: `{action.line()}`"
            )
        if not _allowed(action, facts, plan):
            raise MoreThanStarting(f"starting it would also take `{action.line()}`")
    return plan


# What a replica site's start may make of its export: all but a target its target service did
# not restore, which is the primary's to make again, with the ACL and CHAP its controller sets.
_TARGET_PARTS = frozenset(
    {Verb.CREATE_TARGET, Verb.CREATE_PORTAL, Verb.CREATE_LUN, Verb.CREATE_NODE_ACL, Verb.UPDATE_NODE_ACL}
)
_ACLS = frozenset({Verb.CREATE_NODE_ACL, Verb.UPDATE_NODE_ACL})


def start_replica_site(plan: Plan, facts: Mapping[str, SiteFacts], here: frozenset[str]) -> Plan:
    """One mirror's start at a site that holds only a replica of it: that site's own part and
    nothing else. After its boot Debian's initramfs has its replica disk in an inactive md127,
    and its target service restores the target and its ACL but not the LUN (docs/safety.md,
    "Boot"): the partial array is stopped, the backstore and LUN made again, the points' stack
    activated, a tunnel brought up. The rest (the assembly, a leg's re-add) is the primary's,
    by its start or its reconciler, and so is whatever carries the CHAP the primary's
    controller set (it sets both ends of a session; this site's generated secrets are its
    own): an ACL whose CHAP is not the one LIO has, and a target the service did not restore
    at all (its ACL would be this site's guess). The same allow-list as start_mirror's;
    anything more here holds the mirror for `apply`."""
    remade = {a.target for a in plan.actions if a.verb == Verb.CREATE_TARGET and a.site in here}
    local: list[Action] = []
    for action in plan.actions:
        if action.site not in here:
            continue
        if action.verb in _TARGET_PARTS and action.target in remade:
            continue
        if action.verb in _ACLS and not _restores_an_acl(action, facts[action.site], plan):
            continue
        if not _allowed(action, facts, plan):
            raise MoreThanStarting(f"starting its export here would also take `{action.line()}`")
        local.append(action)
    if not any(a.verb in _TARGET_PARTS or a.verb == Verb.CREATE_BACKSTORE for a in local):
        # Nothing of LIO changed here: nothing to save (else start would never be done).
        local = [a for a in local if a.verb != Verb.SAVE_LIO_CONFIG]
    return Plan(tuple(local), plan.pending if local else "")


def make_start(
    profile: Profile,
    facts: Mapping[str, SiteFacts],
    secrets: Mapping[str, str],
    configured: Profile | None = None,
) -> Plan:
    """Every mirror's start (each planned alone, as the reconciler plans it); a mirror whose
    plan holds more, or that its plan refuses (a split brain, data to write over), is held and
    named in the notes ("held for `remirror apply`: ...") while the others start.

    `profile` has the roles the legs' records give, `configured` (if other) the profile's file:
    a mirror whose primary is at another site in both is started here as a replica site
    (start_replica_site); one promoted away from here starts nothing here (promoted_elsewhere)."""
    actions: list[Action] = []
    pending: list[str] = []
    held: list[str] = []
    here = frozenset(name for name, site in profile.sites.items() if site.is_local)
    for mirror in profile.mirrors:
        alone = profile.model_copy(update={"mirrors": [mirror]})
        primary = mirror.primary.site
        as_configured = (configured or profile).mirror(mirror.name).primary.site
        replica_here = primary not in here and as_configured == primary
        if primary in here and as_configured not in here and not _promoted_here(profile, mirror, facts):
            # Another site's leg alone says this one was promoted: a boot does not take that
            # on its word (a promotion writes this site's own leg first).
            held.append(
                f"{HELD}: {mirror.name}: the legs' records make {primary} its primary, but not"
                f" {primary}'s own leg: run `remirror status` there"
            )
            continue
        try:
            plan = make_plan(alone, facts, secrets)
            if replica_here:
                started = start_replica_site(plan, facts, here)
            else:
                started = start_mirror(plan, facts, here)
        except PlanError as refused:  # MoreThanStarting, SplitBrain, a disk in use ...
            held.append(f"{HELD}: {mirror.name}: {refused}")
            continue
        # A tunnel's actions are every mirror's: carried out once.
        actions += [a for a in started.actions if a not in actions]
        if started.pending:
            pending.append(started.pending)
    return Plan(tuple(actions), "; ".join(pending), tuple(held))


def _promoted_here(profile: Profile, mirror: Mirror, facts: Mapping[str, SiteFacts]) -> bool:
    """Whether the running primary's own leg records it as the primary (its newest generation)."""
    own = leg_records(mirror, array_uuid(profile, mirror), facts).get(mirror.primary.site)
    return own is not None and own.current.site == mirror.primary.site


def promoted_elsewhere(profile: Profile, running: Profile) -> tuple[str, ...]:
    """Notes for the mirrors that run at another site than `profile` names primary (`running`:
    as the legs' records have them): an old primary booting after its DR site's promotion
    starts nothing, and says why, not only that nothing changed."""
    return tuple(
        f"{mirror.name} runs at {running.mirror(mirror.name).primary.site} (promoted there, as its"
        f" legs' records say), not at {mirror.primary.site} as the profile has it:"
        f" {mirror.primary.site}'s leg is its replica now (docs/failover.md)"
        for mirror in profile.mirrors
        if running.mirror(mirror.name).primary.site != mirror.primary.site
    )
