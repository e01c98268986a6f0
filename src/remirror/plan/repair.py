"""Plan the reconciler's repairs of one mirror. Pure: no I/O.

The reconciler is level-based: each pass looks at what is, not at what
happened, and does the next safe thing. It re-creates what apply would
(a replica's cache and LIO objects after a DR host restart, node records,
sessions, write-mostly, write-behind), resumes a resync left pending in an auto-read-only array,
and puts a returning replica leg back with a bitmap-based `--re-add`. What
it never does, because each can lose data: create or assemble an array,
start a full rebuild (`--add`), touch anything while the primary leg is
down, or re-add a leg that took writes of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from remirror.facts.site import SiteFacts
from remirror.health.state import FAULTY, INCOMPLETE, MISSING, MirrorHealth, State
from remirror.plan.actions import CHANGE, Action, Verb
from remirror.plan.boot_arrays import misnamed_array
from remirror.plan.initiator import logout_step
from remirror.plan.planner import make_plan
from remirror.plan.tunnel import tunnel_actions
from remirror.profile.model import Mirror, Profile, ReplicaLeg
from remirror.profile.names import array_uuid, leg_device, replica_path
from remirror.profile.types import Portal
from remirror.profile.wireguard import replica_portal
from remirror.protocol.commands import MdMember, MdReadWrite
from remirror.protocol.steps import TOOL_FAILED, LegRecordJoin, Step, WaitPath
from remirror.roles import points_pool

# States in which nothing is touched: a person decides.
_HANDS_OFF = {
    State.LOCAL_DEFUNCT: "the primary leg is down: remirror repairs nothing while it is",
    State.SPLIT_BRAIN: "split brain: remirror will not choose which side's writes to lose",
    State.DEFUNCT: "the array is not running: `remirror apply` assembles it once you have checked why",
    State.ABSENT: "the mirror was never built: run `remirror apply`",
    State.UNKNOWN: "the primary site could not be observed",
}


@dataclass(frozen=True)
class Repair:
    """What the reconciler will do for one mirror, or why it will not."""

    mirror: str
    actions: tuple[Action, ...]
    blocked: str = ""  # why a repair that is needed cannot be made now


_TUNNEL = (Verb.MAKE_TUNNEL_KEY, Verb.SET_TUNNEL)


def make_repair(
    profile: Profile,
    mirror: Mirror,
    facts: Mapping[str, SiteFacts | None],
    secrets: Mapping[str, str],
    health: MirrorHealth,
    held: Mapping[str, str] | None = None,
) -> Repair:
    """The next safe repairs of `mirror`, given its health; `held`: the replica sites whose leg is
    left out for now (re-added too often without coming back in sync: health/seen.py), and why."""
    if health.state in _HANDS_OFF:
        return Repair(mirror.name, (), f"{_HANDS_OFF[health.state]} ({health.reason})")
    unreachable = [s for s in mirror.sites if facts.get(s) is None]
    if unreachable:
        return Repair(mirror.name, (), f"site {', '.join(unreachable)} could not be reached: waiting for it")
    observed = {name: site for name, site in facts.items() if site is not None}
    misnamed = misnamed_array(mirror, observed[mirror.primary.site], array_uuid(profile, mirror))
    if misnamed is not None:
        # Every repair names the mirror's device, which does not lead to it: start or apply
        # assembles it again under its name (plan/boot_arrays.py); the reconciler does not stop it.
        return Repair(
            mirror.name,
            (),
            f"{mirror.md_device} runs as /dev/{misnamed.kernel_name} ({misnamed.array_state}):"
            " `remirror start` or `remirror apply` assembles it again under its name",
        )
    # Apply's own plan, for this mirror alone, minus what only apply may do.
    alone = profile.model_copy(update={"mirrors": [mirror]})
    # The tunnel is every mirror's: its ends as the whole profile has them (peers of other
    # mirrors kept), not as this mirror alone would.
    tunnel = tunnel_actions(profile, observed)[0] if mirror.transport == "wireguard" else []
    planned = [*tunnel, *(a for a in make_plan(alone, observed, secrets).actions if a.verb not in _TUNNEL)]
    # A running array elsewhere (a former primary's) is apply's to stop; a partial assembly by
    # udev, which never ran, is the reconciler's too (plan/boot_arrays.py, release_partial_assembly).
    former = [a for a in planned if a.verb == Verb.STOP_ARRAY and not a.repair]
    if former:
        return Repair(
            mirror.name,
            (),
            f"site {former[0].site} still runs {mirror.md_device} from before {mirror.primary.site} was"
            " promoted: `remirror apply` stops it there so that its leg can rejoin",
        )
    # An allow-list, decided where each action is built (Action.repair): building or
    # reshaping the array, stopping one, changing a cache (a drain can take an hour) and
    # every removal are apply's and its operator's; so is any verb added later until
    # someone decides otherwise.
    actions = [a for a in planned if a.repair and not a.destructive]
    primary = observed[mirror.primary.site]
    blocked = []
    recovering = set()  # targets whose session exists but is down: iscsid is retrying them
    for replica, leg in zip(mirror.replicas, health.legs[1:], strict=True):
        iqn = profile.replica_iqn(mirror, replica)
        if leg.session not in ("", "LOGGED_IN"):
            recovering.add(iqn)
        recreated = any(a.verb == Verb.CREATE_TARGET and a.target == iqn for a in actions)
        if iqn in recovering and recreated:
            # The target was gone (a DR host restart) and this pass re-creates
            # it: iscsid may have stopped retrying a target that did not
            # exist, so log in afresh. Under `wait` writes queue meanwhile.
            actions.append(_login_afresh(actions, iqn, replica_portal(profile, mirror, replica)))
        if leg.status not in (FAULTY, MISSING):
            continue
        if health.legs[0].status == INCOMPLETE:
            # Its recovery would read the primary's leg, which lacks sectors whose only good copy
            # may be on this very leg: md would give up on it or mark them lost there too.
            blocked.append(
                f"the primary leg lacks {health.legs[0].missed_words} (its disk failed writes): the"
                f" replica leg on {replica.site} is not put back from it; replace that disk first"
                " (`remirror apply` rebuilds a new one from the replica)"
            )
            continue
        if iqn in recovering and not recreated:
            blocked.append(f"the session to {replica.site} is {leg.session}: waiting for the link")
            continue
        pool = points_pool(mirror, replica.site, observed.get(replica.site))
        if pool is not None and pool.mode != "rw":
            # Its writes would fail again at once: a full pool fails them rather than drop a point.
            blocked.append(
                f"the points {replica.site} keeps of its leg fill their pool ({pool.mode}): the replica"
                f" takes no writes until there is room; prune them at {replica.site} (`remirror cdp"
                f" prune PROFILE {mirror.name} --leg --keep DURATION --yes`)"
            )
            continue
        if held and replica.site in held:
            blocked.append(held[replica.site])
            continue
        logs_in = recreated or any(a.verb == Verb.LOGIN_SESSION and a.target == iqn for a in actions)
        if logs_in:
            # A re-add is decided only on a superblock read from the disk
            # itself (a leg used elsewhere must be caught first): next pass.
            blocked.append(f"the replica leg on {replica.site} is re-added once its disk has been examined")
            continue
        path = replica_path(profile, mirror, replica)
        disk = primary.disks.get(path)
        if disk is None or not disk.exists or disk.offline:
            state = f"offline ({disk.offline})" if disk is not None and disk.offline else "missing"
            blocked.append(f"{path} is {state}: waiting for it")
            continue
        if disk.superblock is None or disk.superblock.array_uuid != array_uuid(profile, mirror):
            blocked.append(
                f"{path} carries no superblock of {mirror.md_device}: only a full rebuild would bring it"
                f" back, and remirror does not start one by itself (`mdadm {mirror.md_device} --add {path}`"
                " if you accept it)"
            )
            continue
        actions.append(_readd(profile, mirror, replica, leg.member if leg.status == FAULTY else "", primary))
    # A session that exists is iscsid's to recover; logging in again would not help.
    actions = [a for a in actions if not (a.verb == Verb.LOGIN_SESSION and a.target in recovering)]
    array = primary.array_named(mirror.name, array_uuid(profile, mirror))
    if array is not None and array.array_state == "read-auto":
        # Assembled auto-read-only (md's start_ro, as at boot): an interrupted
        # resync stays PENDING until the first write. Resume it now.
        actions.append(
            Action(
                primary.name,
                Verb.RESUME_RESYNC,
                f"{mirror.md_device} (auto-read-only: its pending resync starts)",
                CHANGE,
                (MdReadWrite(mirror.md_device),),
                repair=True,
            )
        )
    return Repair(mirror.name, tuple(actions), "; ".join(blocked))


def _login_afresh(actions: list[Action], iqn: str, portal: Portal) -> Action:
    """Apply's login of this target, preceded by a logout of the dead session."""
    login = next(a for a in actions if a.verb == Verb.LOGIN_SESSION and a.target == iqn)
    logout = logout_step(iqn, portal)
    steps = login.steps if login.steps[0] == logout else (logout, *login.steps)
    return Action(login.site, Verb.LOGIN_AFRESH, login.subject, CHANGE, steps, repair=True, target=iqn)


def _readd(profile: Profile, mirror: Mirror, replica: ReplicaLeg, faulty: str, primary: SiteFacts) -> Action:
    """Put a returning replica disk back into the array: only what its bitmap says it missed."""
    path = replica_path(profile, mirror, replica)
    steps: list[Step] = []
    if faulty:
        # md keeps a failed member, or one whose disk went away with its
        # session, until it is removed; only then can the disk that came
        # back (often under another name) be re-added.
        steps += [
            MdMember(mirror.md_device, "fail", "detached", ok_codes=(0, TOOL_FAILED)),
            MdMember(mirror.md_device, "remove", "detached", ok_codes=(0, TOOL_FAILED)),
            MdMember(mirror.md_device, "remove", "failed", ok_codes=(0, TOOL_FAILED)),
        ]
    steps += [
        WaitPath(path, 60),
        MdMember(
            mirror.md_device,
            "re-add",
            path,
            explain={
                TOOL_FAILED: f"md refused to re-add the replica leg on {replica.site}: its bitmap cannot"
                " say what it missed, so only a full rebuild would do, and remirror does not start one by"
                f" itself (`mdadm {mirror.md_device} --add {path}` if you accept it)"
            },
        ),
        # A leg back in the array joins the array's generation (docs/failover.md).
        LegRecordJoin(leg_device(mirror, mirror.primary, primary.dm), path),
    ]
    return Action(
        primary.name,
        Verb.RE_ADD_LEG,
        f"{path} into {mirror.md_device} (resyncs only what {replica.site} missed)",
        CHANGE,
        tuple(steps),
        repair=True,  # only after ran_without_primary cleared the leg (health: not SPLIT_BRAIN)
        target=profile.replica_iqn(mirror, replica),  # whose leg: the reconciler counts re-adds
    )
