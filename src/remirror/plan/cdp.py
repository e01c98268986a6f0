"""Plan CDP on a mirror: build, activate or take down its stack. Pure.

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

from remirror.facts.cdp import is_view, stack_names
from remirror.facts.site import SiteFacts
from remirror.plan.actions import CREATE, DELETE, Action, Verb
from remirror.profile.model import Mirror, Profile
from remirror.protocol.steps import CdpDeactivate, CdpStack


def volume_path(mirror: Mirror) -> str:
    """The device applications use when the mirror has CDP."""
    return f"/dev/mapper/{stack_names(mirror.name)['volume']}"


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
        f" (a point every {settings.every:g}s, kept {settings.retention.shown()})"
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
    views = sorted(n for n in primary.dm if is_view(n, mirror.name))
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
