"""CDP on a mirror: where the stack's slices lie, its dm tables, and when points are taken or pruned. Pure.

The design, and why, is docs/cdp.md. In short: the md device is cut into
linear slices (the index of points, the thin pool's metadata, the era's
metadata, the pool's data); thin volume 0 of the pool is the user's data,
dm-era on top of it is the device the user opens; a recovery point is a
thin snapshot taken while both are suspended.

The layout is decided once, when the stack is created, and recorded in the
index (at the start of the mirror, a fixed place): a later profile change of
`history` or `chunk` cannot move data and is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from remirror.facts.cdp import CdpIndex, RecoveryPoint, ThinPoolStatus, stack_names
from remirror.facts.site import SiteFacts
from remirror.plan.actions import CREATE, DELETE, Action, Verb
from remirror.plan.steps import CdpDeactivate, CdpStack
from remirror.profile.model import Mirror, Profile

# The pool's low-water mark and remirror's own early pruning: keep this much of the
# pool's data free.
FREE_RESERVE = 0.10


def volume_path(mirror: Mirror) -> str:
    """The device applications use when the mirror has CDP."""
    return f"/dev/mapper/{stack_names(mirror.name)['volume']}"


def point_due(index: CdpIndex, now: float, every: float) -> bool:
    """Whether a point is due: none yet, or the newest is `every` old.

    A timer a little early (within a tenth of `every`) counts as on time, so a
    timer firing every `every` never skips one.
    """
    if not index.points:
        return True
    return now - index.points[-1].time >= every * 0.9


@dataclass(frozen=True)
class Pruning:
    """Which points to delete now, and why."""

    expired: tuple[RecoveryPoint, ...]  # older than the window
    for_space: tuple[RecoveryPoint, ...]  # within the window, but the pool is running out

    @property
    def points(self) -> tuple[RecoveryPoint, ...]:
        """All points to delete, oldest first."""
        return self.expired + self.for_space


def pruning(index: CdpIndex, now: float, keep: float, pool: ThinPoolStatus | None) -> Pruning:
    """Points older than `keep` go; the newest point always stays.

    When the pool's free data is below FREE_RESERVE, the oldest remaining
    point goes too (one per call: what it frees shows in the pool's status
    only after the delete), so that the volume never runs out of space for
    new writes: the window shrinks instead, and `status` says so.
    """
    points = list(index.points)
    expired = tuple(p for p in points[:-1] if now - p.time > keep)
    left = [p for p in points[:-1] if p not in expired]
    for_space: tuple[RecoveryPoint, ...] = ()
    if pool is not None and pool.data_total and left:
        free = 1 - (pool.data_used / pool.data_total)
        if free < FREE_RESERVE:
            for_space = (left[0],)
    return Pruning(expired, for_space)


def window(index: CdpIndex, now: float) -> float:
    """Seconds of history actually kept (age of the oldest point), 0 without points."""
    return now - index.points[0].time if index.points else 0.0


class CdpPlanError(Exception):
    """The mirror's CDP stack cannot be reconciled with the profile (the planner adds where)."""


def cdp_actions(
    profile: Profile, position: int, mirror: Mirror, primary: SiteFacts, new_array: bool
) -> list[Action]:
    """Build or activate the mirror's CDP stack on its primary, once md is there.

    The step decides at run time between activating a stack the mirror
    already carries (its index says where everything is) and creating one;
    it creates one only where the metadata goes is blank, on an array made in
    the same run (`new_array`), or when the plan was accepted as destructive.
    An array this run only assembles has not been seen yet: the plan says
    ActivateCdp, and the step refuses to create over data it finds there.
    """
    names = stack_names(mirror.name)
    present = [n for n in names.values() if n in primary.dm]
    if mirror.cdp is None:
        if present:
            raise CdpPlanError(
                f"{profile.where('mirrors', position)}: site {primary.name}: {mirror.name} carries a CDP"
                " stack: its data lives in the stack's pool, so `cdp` cannot be dropped in place"
                " (keep it, or copy the volume out and destroy the mirror)"
            )
        return []
    if len(present) == len(names):
        return []  # active; the layout is the index's, not the profile's (see module doc)
    md = primary.disks.get(mirror.md_device)
    seen = md is not None and md.exists
    head = md.first_sector if md is not None and seen else ""
    destructive = ""
    if md is not None and seen and head not in ("zero", "cdp"):
        what = md.signatures[0].describe() if md.signatures else "data"
        destructive = f"the {what} at the start of {mirror.md_device} (CDP's metadata goes there)"
    verb = Verb.CREATE_CDP if new_array or head in ("zero", "other") else Verb.ACTIVATE_CDP
    settings = mirror.cdp
    subject = (
        f"{volume_path(mirror)} on {mirror.md_device}"
        f" (a point every {settings.every:g}s, kept {settings.keep:g}s)"
    )
    step = CdpStack(
        mirror.name,
        mirror.md_device,
        settings.chunk,
        settings.history,
        fresh=new_array,
        allow_data=bool(destructive),
    )
    # Activating the stack of an array that runs again is a repair; creating one is apply's.
    repair = verb == Verb.ACTIVATE_CDP
    return [Action(primary.name, verb, subject, CREATE, (step,), destructive=destructive, repair=repair)]


def deactivation_actions(mirror: Mirror, primary: SiteFacts) -> list[Action]:
    """Take the stack down before its mirror stops (destroy): the data stays on the mirror."""
    names = stack_names(mirror.name)
    present = [n for n in names.values() if n in primary.dm]
    views = sorted(n for n in primary.dm if n.startswith(f"{names['volume']}-at-"))
    if not present and not views:
        return []
    step = CdpDeactivate(mirror.name, tuple(views))
    return [
        Action(
            primary.name,
            Verb.DEACTIVATE_CDP,
            f"{volume_path(mirror)} (its points stay on the mirror)",
            DELETE,
            (step,),
        )
    ]


def stack_kernel_names(mirror: Mirror, primary: SiteFacts) -> set[str]:
    """Kernel names (dm-N) of the stack's devices: the mirror's own holders, not users to refuse for."""
    names = set(stack_names(mirror.name).values())
    return {d.kernel_name for n, d in primary.dm.items() if n in names}
