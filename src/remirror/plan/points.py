"""Plan a leg's own recovery points: a thin pool on its disk, the leg in its volume. Pure.

A replica with `points` keeps its copy's history where only its own site
can reach it (docs/security.md): its disk is cut as a mirror's is for CDP
(remirror.facts.cdp: an index of points, the pool's and the era's metadata,
the pool's data), and LIO exports the stack's volume, not the disk. The
site's own `remirror cdp run` takes and prunes the points (thin snapshots);
no request from another site can name the disk, the pool or the points
(remirror.agent.policy), so a primary in an attacker's hands can write over
the volume, as over any leg, but not reach the points under it.

The stack's names come from `points_key` (MIRROR.SITE: never a mirror's
name). The volume is the leg: md's superblock and the leg record live in
it, so an existing stack that is not active (a reboot) is activated first
and the rest of the mirror planned once it is (`Plan.pending`): what it
holds cannot be seen before.
"""

from __future__ import annotations

import dataclasses

from remirror.facts.cdp import is_view, layout, stack_names
from remirror.facts.site import DiskFacts, SiteFacts
from remirror.plan.actions import CREATE, DELETE, Action, PlanError, Verb
from remirror.plan.md import destroys
from remirror.profile.model import Mirror, PrimaryLeg, Profile, ReplicaLeg
from remirror.profile.names import backstore_name, points_key, points_volume
from remirror.protocol.steps import CdpDeactivate, CdpStack


@dataclasses.dataclass(frozen=True)
class LegPoints:
    """What the planner does about one leg's points: `actions` first, then the leg is `device`
    (None: not known until `actions` have run, so the mirror waits)."""

    actions: list[Action]
    device: DiskFacts | None


def points_actions(
    profile: Profile,
    where: tuple[str | int, ...],
    mirror: Mirror,
    leg: PrimaryLeg | ReplicaLeg,
    site: SiteFacts,
) -> LegPoints:
    """Build or activate the leg's own points stack; what md or LIO then opens for the leg."""
    settings = leg.points
    if settings is None:
        return LegPoints([], None)  # not asked for: the planner asks only about legs with points
    key = points_key(mirror, leg.site)
    names = stack_names(key)
    path = points_volume(mirror, leg.site)
    disk = site.disks[leg.disk]
    if all(name in site.dm for name in names.values()):
        return LegPoints([], site.disks.get(path, DiskFacts(path, exists=False)))
    subject = (
        f"{path} on {leg.disk} (points every {settings.every:g}s, kept {settings.retention.shown()},"
        f" taken by {leg.site} itself)"
    )
    step = CdpStack(key, leg.disk, settings.chunk, settings.history, fresh=False, allow_data=False)
    if disk.first_sector == "cdp":
        # Its points are on the disk; the volume (md's superblock, the leg record) shows once active.
        return LegPoints(
            [Action(site.name, Verb.ACTIVATE_POINTS, subject, CREATE, (step,), repair=True)], None
        )
    if isinstance(leg, ReplicaLeg) and site.backstores.get(backstore_name(mirror, leg)) == disk.path:
        raise PlanError(
            f"{profile.where(*where, 'points')}: site {site.name}: {leg.disk} is exported without points:"
            " points can only be laid under a disk nothing uses yet (destroy the mirror, then apply)"
        )
    try:
        volume = layout(disk.size // 512, settings.chunk, settings.history).volume_sectors * 512
    except ValueError as error:
        raise PlanError(f"{profile.where(*where, 'points')}: site {site.name}: {leg.disk}: {error}") from None
    destroyed = destroys(site.name, disk, "")
    if not destroyed and disk.first_sector != "zero":
        # No signature blkid knows, but not zeros either (or not probed): data all the same.
        destroyed = f"site {site.name}: {leg.disk} holds data where the points' metadata goes"
    if destroyed and not profile.sites[leg.site].is_local:
        # The DR site's own points are never laid over data at another site's word
        # (remirror.agent.policy refuses it): the site's operator clears the disk there.
        raise PlanError(
            f"{profile.where(*where, 'points')}: {destroyed}: only site {site.name}'s operator lays"
            f" points over data: clear {leg.disk} there (`wipefs -a`, or zero its start), then apply again"
        )
    step = dataclasses.replace(step, allow_data=bool(destroyed))
    action = Action(site.name, Verb.CREATE_POINTS, subject, CREATE, (step,), destructive=destroyed)
    # A new thin volume reads as zeros: a blank leg of the volume's size.
    blank = DiskFacts(path, exists=False, size=volume, first_sector="zero")
    return LegPoints([action], blank)


def points_deactivation(mirror: Mirror, leg: PrimaryLeg | ReplicaLeg, site: SiteFacts) -> list[Action]:
    """Take the leg's points stack down (destroy): the points and the data stay on its disk."""
    key = points_key(mirror, leg.site)
    names = stack_names(key)
    views = sorted(n for n in site.dm if is_view(n, key))
    # What a drill that did not end left (remirror.drill): its data device first, it sits on the copy.
    views += [n for n in (f"{names['volume']}-drill-data", f"{names['volume']}-drill") if n in site.dm]
    if not any(n in site.dm for n in names.values()) and not views:
        return []
    subject = f"{points_volume(mirror, leg.site)} (its points and data stay on {leg.disk})"
    return [Action(site.name, Verb.DEACTIVATE_POINTS, subject, DELETE, (CdpDeactivate(key, tuple(views)),))]
