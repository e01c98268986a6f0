"""Plan LIO on a site: the targets that export replica legs and mirrors. Pure: no I/O.

An export is a backstore on a block device, a target with TPG 1, a portal,
LUN 0 and one ACL per initiator (CHAP on the ACL), saved afterwards to the
file the site's target service restores at boot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from remirror.facts.model import secret_digest
from remirror.facts.site import DiskFacts, SiteFacts
from remirror.plan.actions import CHANGE, CREATE, DELETE, Action, PlanError, Verb
from remirror.plan.cdp import volume_path
from remirror.profile.model import Chap, Mirror, Profile, ReplicaLeg
from remirror.profile.names import backstore_name, export_backstore_name, leg_device
from remirror.profile.timeouts import IN_ORDER_TARGET
from remirror.profile.types import Portal
from remirror.protocol.lio import (
    AclChap,
    LioCreateBackstore,
    LioCreateLun,
    LioCreatePortal,
    LioCreateTarget,
    LioDeleteBackstore,
    LioDeleteTarget,
    LioSave,
    LioSetAcl,
    LioSetParameters,
)


def replica_export_actions(
    mirror: Mirror,
    replica: ReplicaLeg,
    site: SiteFacts,
    disk: DiskFacts,
    iqn: str,
    portal: Portal,
    chap: Chap | None,
    initiator: str,
    secrets: Mapping[str, str],
    destructive: str,
) -> list[Action]:
    """A replica leg's disk exported to its primary alone; `destructive`: what exporting it
    writes over (a new array's first sync does)."""
    export = Export(
        site=site,
        iqn=iqn,
        backstore=backstore_name(mirror, replica),
        disk=disk,
        portal=portal,
        initiators=(initiator,),
        chap=chap,
    )
    return _target_actions(export, secrets, destructive)


def export_actions(
    mirror: Mirror, primary: SiteFacts, device: DiskFacts, secrets: Mapping[str, str]
) -> list[Action]:
    """The mirror (or its CDP volume) served to application hosts, or its export removed."""
    if mirror.export is None:
        return export_removal_actions(mirror, primary)  # the profile no longer has it
    export = Export(
        site=primary,
        iqn=mirror.export.iqn,
        backstore=export_backstore_name(mirror),
        disk=device,
        portal=mirror.export.portal_address,
        initiators=tuple(mirror.export.initiators),
        chap=mirror.export.chap,
    )
    return _target_actions(export, secrets, destructive="")


@dataclass(frozen=True)
class Export:
    """A block device served by LIO: a replica disk to its primary, or a mirror to application hosts."""

    site: SiteFacts
    iqn: str
    backstore: str
    disk: DiskFacts
    portal: Portal
    initiators: tuple[str, ...]
    chap: Chap | None


def acl_chap_as_seen(chap: AclChap | None) -> tuple[str, str, str, str]:
    """An ACL's CHAP as a site's facts show it (LioAcl.chap): users, and passwords as digests."""
    if chap is None:
        return ("", "", "", "")
    mutual = secret_digest(chap.mutual_password) if chap.mutual_password else ""
    return (chap.username, secret_digest(chap.password), chap.mutual_username, mutual)


def _target_actions(export: Export, secrets: Mapping[str, str], destructive: str) -> list[Action]:
    """Backstore, target, TPG, portal, LUN 0 and one ACL per initiator; saved if anything changed."""
    site, iqn, name, disk = export.site, export.iqn, export.backstore, export.disk
    if not site.lio_available:
        raise PlanError(f"site {site.name}: LIO is not available (load target_core_mod and mount configfs)")
    actions = []
    if name not in site.backstores:
        if disk.users():
            raise PlanError(f"site {site.name}: {disk.path} is in use ({'; '.join(disk.users())})")
        actions.append(
            Action(
                site.name,
                Verb.CREATE_BACKSTORE,
                f"{name} (block) on {disk.path}",
                CREATE,
                (LioCreateBackstore(name, disk.path),),
                destructive=destructive,
                repair=True,  # a DR host's restart loses LIO's objects; the disk is checked above
                target=iqn,
            )
        )
    elif site.backstores[name] != disk.path:
        raise PlanError(
            f"site {site.name}: backstore {name} exists on {site.backstores[name]}, not {disk.path}"
        )
    target = site.targets.get(iqn)
    chap = export.chap
    parameters = dict(IN_ORDER_TARGET)
    if target is None:
        actions.append(
            Action(
                site.name,
                Verb.CREATE_TARGET,
                f"{iqn} (TPG 1, CHAP {'on' if chap else 'off'})",
                CREATE,
                (LioCreateTarget(iqn, chap is not None, parameters),),
                repair=True,
                target=iqn,
            )
        )
    elif {k: target.parameters.get(k) for k in parameters} != parameters:
        # Taken at the initiator's next login (remirror.plan.initiator logs in again when what
        # a session negotiated lets writes overtake each other).
        changed = ", ".join(f"{k}={v}" for k, v in parameters.items() if target.parameters.get(k) != v)
        actions.append(
            Action(
                site.name,
                Verb.SET_TARGET_PARAMETERS,
                f"{iqn} ({changed})",
                CHANGE,
                (LioSetParameters(iqn, parameters),),
                repair=True,
                target=iqn,
            )
        )
    portal = export.portal
    if target is None or f"{portal.address}:{portal.port}" not in target.portals:
        actions.append(
            Action(
                site.name,
                Verb.CREATE_PORTAL,
                f"{portal} on {iqn}",
                CREATE,
                (LioCreatePortal(iqn, portal.address, portal.port),),
                repair=True,
                target=iqn,
            )
        )
    if target is None or 0 not in target.luns:
        actions.append(
            Action(
                site.name,
                Verb.CREATE_LUN,
                f"LUN 0 -> {name} on {iqn}",
                CREATE,
                (LioCreateLun(iqn, 0, name),),
                repair=True,
                target=iqn,
            )
        )
    wanted_chap = None
    if chap is not None:
        wanted_chap = AclChap(chap.username, secrets[chap.password_file])
        if chap.mutual:
            wanted_chap = AclChap(
                chap.username, wanted_chap.password, chap.target_username, secrets[chap.target_password_file]
            )
    wanted_acl = acl_chap_as_seen(wanted_chap)
    said = (wanted_chap.password, wanted_chap.mutual_password) if wanted_chap else ()
    passwords = tuple(password for password in said if password)  # for redaction
    for initiator in export.initiators:
        acl_step = LioSetAcl(iqn, initiator, 0, wanted_chap, passwords)
        acl = target.acls.get(initiator) if target else None
        if acl is None:
            actions.append(
                Action(
                    site.name,
                    Verb.CREATE_NODE_ACL,
                    f"{initiator} on {iqn}",
                    CREATE,
                    (acl_step,),
                    repair=True,
                    target=iqn,
                )
            )
        elif acl.chap != wanted_acl or 0 not in acl.mapped_luns:
            actions.append(
                Action(
                    site.name,
                    Verb.UPDATE_NODE_ACL,
                    f"{initiator} on {iqn} (CHAP)",
                    CHANGE,
                    (acl_step,),
                    repair=True,
                    target=iqn,
                )
            )
    if actions:
        actions.append(save_lio_action(site))
    return actions


def leg_export_removal(
    profile: Profile,
    mirror: Mirror,
    replica: ReplicaLeg,
    site: SiteFacts,
    initiator: str = "",
    fence: bool = False,
) -> list[Action]:
    """Take a replica leg's export away (its target, then its backstore: LIO holds the disk open).

    `initiator`: the primary, whose session the same plan ends first; `fence`: cut it off anyway.
    """
    return lio_removal_actions(
        site,
        [profile.replica_iqn(mirror, replica)],
        backstore_name(mirror, replica),
        leg_device(mirror, replica, site.dm),
        logged_out_before=initiator,
        fence=fence,
    )


def save_lio_action(site: SiteFacts) -> Action:
    """LIO's configuration saved where the site's target service restores it from at boot."""
    return Action(
        site.name,
        Verb.SAVE_LIO_CONFIG,
        site.lio_save_path,
        CHANGE,
        (LioSave(site.lio_save_path),),
        repair=True,  # what the DR host's target service restores after its next restart
    )


def export_removal_actions(mirror: Mirror, primary: SiteFacts) -> list[Action]:
    """Remove the mirror's export: the profile's target, or whichever serves the export's backstore."""
    name = export_backstore_name(mirror)
    serving = [iqn for iqn, target in primary.targets.items() if name in target.luns.values()]
    iqns = [mirror.export.iqn] if mirror.export else []
    exported = volume_path(mirror) if mirror.cdp is not None else mirror.md_device
    return lio_removal_actions(primary, [*iqns, *(i for i in serving if i not in iqns)], name, exported)


def lio_removal_actions(
    site: SiteFacts,
    iqns: list[str],
    backstore: str,
    device: str,
    logged_out_before: str = "",
    fence: bool = False,
) -> list[Action]:
    """Delete targets (with their TPGs, portals, LUNs and ACLs) and a backstore, then save.

    Refused while initiators are logged in: pulling a disk from under a host
    that uses it is not a plan, it is an outage. `logged_out_before`: the
    initiator whose session the same plan ends first (the primary's, on a
    replica target). `fence`: cutting the initiators off is the point (a
    forced promotion), their sessions go with the target.
    """
    actions = []
    for iqn in iqns:
        target = site.targets.get(iqn)
        if target is None:
            continue
        busy = sorted(i for i, acl in target.acls.items() if acl.logged_in and i != logged_out_before)
        if busy and not fence:
            raise PlanError(
                f"site {site.name}: {iqn} has initiators logged in ({', '.join(busy)}): log them out first"
            )
        actions.append(
            Action(
                site.name,
                Verb.FENCE_TARGET if fence else Verb.DELETE_TARGET,
                f"{iqn} (its portals, LUNs and ACLs{', and their sessions' if fence else ''})",
                DELETE,
                (LioDeleteTarget(iqn),),
                target=iqn,
            )
        )
    if backstore in site.backstores:
        if site.backstores[backstore] != device:
            raise PlanError(
                f"site {site.name}: backstore {backstore} is on {site.backstores[backstore]}, not {device}:"
                " not removing what remirror did not make"
            )
        actions.append(
            Action(
                site.name,
                Verb.DELETE_BACKSTORE,
                f"{backstore} on {device} (the disk keeps its data)",
                DELETE,
                (LioDeleteBackstore(backstore),),
            )
        )
    if actions:
        actions.append(save_lio_action(site))
    return actions
