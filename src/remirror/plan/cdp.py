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

from remirror.facts.cdp import CdpIndex, Layout, RecoveryPoint, ThinPoolStatus
from remirror.facts.site import SiteFacts
from remirror.plan.actions import CREATE, DELETE, Action
from remirror.profile.model import Mirror, Profile

SECTOR = 512
MiB = 1024 * 1024
INDEX_BYTES = 4 * MiB  # two slots of 2 MiB: room for the 60,000 points a profile may keep
INDEX_SLOT = INDEX_BYTES // 2
MIN_POOL_METADATA = 16 * MiB
MIN_ERA_METADATA = 8 * MiB
# The pool's low-water mark and remirror's own early pruning: keep this much of the
# pool's data free.
FREE_RESERVE = 0.10


def stack_names(mirror: str) -> dict[str, str]:
    """The dm names of a mirror's CDP stack, in build order (the user's volume last).

    The index has no device of its own: it is read and written at the mirror's start.
    """
    base = f"remirror-{mirror}-cdp"
    return {
        "tmeta": f"{base}-tmeta",
        "emeta": f"{base}-emeta",
        "tdata": f"{base}-tdata",
        "pool": f"{base}-pool",
        "thin": f"{base}-thin",
        "volume": base,
    }


def view_name(mirror: str, point: int) -> str:
    """The read-only device of one point (`cdp restore --view`)."""
    return f"remirror-{mirror}-cdp-at-{point}"


def volume_path(mirror: Mirror) -> str:
    """The device applications use when the mirror has CDP."""
    return f"/dev/mapper/{stack_names(mirror.name)['volume']}"


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def layout(md_sectors: int, chunk: int, history: int) -> Layout:
    """Cut an md device of `md_sectors` for CDP: `chunk` bytes, `history` % of the data for points.

    Metadata sizes follow LVM's rule of thumb for thin pools (64 bytes per
    data chunk, doubled for snapshots' divergence) and dm-era's needs (a
    4-byte era per block plus archived writesets), with floors that are
    ample for small mirrors.
    """
    chunks = md_sectors * SECTOR // chunk
    align = max(chunk, MiB)
    tmeta = max(MIN_POOL_METADATA, _round_up(chunks * 128, MiB))
    emeta = max(MIN_ERA_METADATA, _round_up(chunks * 8, MiB))
    data_start = _round_up(INDEX_BYTES + tmeta + emeta, align)
    data_bytes = (md_sectors * SECTOR - data_start) // chunk * chunk
    if data_bytes < 16 * chunk:
        raise ValueError(
            f"the mirror ({md_sectors * SECTOR // MiB} MiB) is too small for CDP: its metadata"
            f" alone takes {data_start // MiB} MiB"
        )
    volume = data_bytes * (100 - history) // 100 // chunk * chunk
    return Layout(
        chunk=chunk,
        index=(0, INDEX_BYTES // SECTOR),
        tmeta=(INDEX_BYTES // SECTOR, tmeta // SECTOR),
        emeta=((INDEX_BYTES + tmeta) // SECTOR, emeta // SECTOR),
        data=(data_start // SECTOR, data_bytes // SECTOR),
        volume_sectors=volume // SECTOR,
    )


def tables(mirror: str, md_path: str, plan: Layout) -> dict[str, str]:
    """Each stack device's table (by the keys of `stack_names`), in build order."""
    names = stack_names(mirror)
    low_water = max(1, plan.data[1] // plan.chunk_sectors // 10)  # chunks free when dm raises an event
    return {
        "tmeta": f"0 {plan.tmeta[1]} linear {md_path} {plan.tmeta[0]}",
        "emeta": f"0 {plan.emeta[1]} linear {md_path} {plan.emeta[0]}",
        "tdata": f"0 {plan.data[1]} linear {md_path} {plan.data[0]}",
        # no features: new chunks are zeroed (a partial write never shows old data)
        "pool": f"0 {plan.data[1]} thin-pool /dev/mapper/{names['tmeta']} /dev/mapper/{names['tdata']}"
        f" {plan.chunk_sectors} {low_water} 0",
        "thin": f"0 {plan.volume_sectors} thin /dev/mapper/{names['pool']} 0",
        "volume": f"0 {plan.volume_sectors} era /dev/mapper/{names['emeta']} /dev/mapper/{names['thin']}"
        f" {plan.chunk_sectors}",
    }


def snapshot_table(mirror: str, plan: Layout, point: int) -> str:
    """A point's snapshot as a device (activated read-only)."""
    return f"0 {plan.volume_sectors} thin /dev/mapper/{stack_names(mirror)['pool']} {point}"


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


def changed_bytes(blocks: list[tuple[int, int]], chunk: int, volume_bytes: int) -> list[tuple[int, int]]:
    """Era block ranges [begin, end) as byte ranges (offset, length), clipped to the volume."""
    out = []
    for begin, end in blocks:
        offset = begin * chunk
        length = min(end * chunk, volume_bytes) - offset
        if length > 0:
            out.append((offset, length))
    return out


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
    verb = "CreateCdp" if new_array or head in ("zero", "other") else "ActivateCdp"
    settings = mirror.cdp
    subject = (
        f"{volume_path(mirror)} on {mirror.md_device}"
        f" (a point every {settings.every:g}s, kept {settings.keep:g}s)"
    )
    step = {
        "kind": "cdp_stack",
        "mirror": mirror.name,
        "md": mirror.md_device,
        "chunk": settings.chunk,
        "history": settings.history,
        "fresh": new_array,
        "allow_data": bool(destructive),
    }
    return [Action(primary.name, verb, subject, CREATE, (step,), destructive=destructive)]


def deactivation_actions(mirror: Mirror, primary: SiteFacts) -> list[Action]:
    """Take the stack down before its mirror stops (destroy): the data stays on the mirror."""
    names = stack_names(mirror.name)
    present = [n for n in names.values() if n in primary.dm]
    views = sorted(n for n in primary.dm if n.startswith(f"{names['volume']}-at-"))
    if not present and not views:
        return []
    step = {"kind": "cdp_deactivate", "mirror": mirror.name, "views": views}
    return [
        Action(
            primary.name,
            "DeactivateCdp",
            f"{volume_path(mirror)} (its points stay on the mirror)",
            DELETE,
            (step,),
        )
    ]


def stack_kernel_names(mirror: Mirror, primary: SiteFacts) -> set[str]:
    """Kernel names (dm-N) of the stack's devices: the mirror's own holders, not users to refuse for."""
    names = set(stack_names(mirror.name).values())
    return {d.kernel_name for n, d in primary.dm.items() if n in names}
