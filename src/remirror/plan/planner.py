"""Diff a profile against the sites' facts into an ordered plan. Pure: no I/O.

The names of what it makes come from `remirror.profile.names`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from remirror.errors import RemirrorError
from remirror.facts.generations import MiB
from remirror.facts.model import MdArray, Signature, secret_digest
from remirror.facts.parsers import CONF_BEGIN, CONF_END, managed_lines
from remirror.facts.site import DiskFacts, SiteFacts
from remirror.plan.actions import CHANGE, CREATE, DELETE, Action, Plan
from remirror.plan.cache import CacheError, cache_actions
from remirror.plan.cdp import CdpPlanError, cdp_actions, volume_path
from remirror.profile.model import Chap, Mirror, PrimaryLeg, Profile, ReplicaLeg
from remirror.profile.names import array_uuid, backstore_name, by_path, export_backstore_name, leg_device
from remirror.profile.timeouts import REPLACEMENT_TIMEOUT
from remirror.profile.types import Portal
from remirror.roles import as_run, has_room_for_record, md_size, ran_without_primary

ISCSIADM_AUTH_FAILED = 24


class PlanError(RemirrorError):
    """The sites are in a state the plan cannot reconcile (a missing disk, a name taken by something else)."""


def make_plan(profile: Profile, facts: Mapping[str, SiteFacts], secrets: Mapping[str, str]) -> Plan:
    """The actions that make the sites match the profile, replica sides first for each mirror."""
    actions: list[Action] = []
    for index, mirror in enumerate(profile.mirrors):
        uuid_ = array_uuid(profile, mirror)
        primary = facts[mirror.primary.site]
        if primary.initiator is None:
            raise PlanError(
                f"site {primary.name}: no initiator name in /etc/iscsi/initiatorname.iscsi"
                " (is open-iscsi installed?)"
            )
        if primary.array_named(mirror.name, uuid_) is None:
            # Decided before anything would assemble the legs: `mdadm --assemble` of legs that
            # each ran alone keeps the one with more events and drops the other's writes.
            split = ran_without_primary(profile, mirror, facts)
            if split:
                raise PlanError(f"mirror {mirror.name} is in split brain: {split}")
        remote_paths = []
        replica_disks: list[DiskFacts] = []
        for r, replica in enumerate(mirror.replicas):
            site = facts[replica.site]
            where = ("mirrors", index, "replicas", r)
            disk = _disk(profile, site, replica.disk, (*where, "disk"))
            # LIO holds a disk it exports without showing in holders or /proc: ask it.
            if (
                replica.cache is not None
                and site.backstores.get(backstore_name(mirror, replica)) == disk.path
            ):
                raise PlanError(
                    f"{profile.where(*where, 'cache')}: site {site.name}: {replica.disk} is exported"
                    " without a cache: a cache can only be put in front of a disk nothing uses yet"
                    " (destroy the mirror, then apply)"
                )
            actions += _cache_actions(profile, mirror, replica, site, disk, where)
            released, device = release_partial_assembly(site, _leg_device(mirror, replica, site, disk), uuid_)
            actions += released
            actions += _stand_down_former_primary(mirror, site, device, uuid_)
            # Sessions it kept from when it ran the mirror (a former primary's, toward the
            # other legs' old targets): they would retry forever.
            actions += logout_actions(profile, as_run(mirror, replica.site), site)
            replica_disks.append(device)
            iqn = profile.replica_iqn(mirror, replica)
            actions += _replica_actions(
                profile, mirror, replica, site, device, iqn, primary.initiator, secrets, uuid_
            )
            actions += _initiator_actions(mirror, replica, primary, iqn, secrets)
            remote_paths.append(by_path(replica, iqn))
        disk = _disk(profile, primary, mirror.primary.disk, ("mirrors", index, "primary", "disk"))
        actions += _cache_actions(
            profile, mirror, mirror.primary, primary, disk, ("mirrors", index, "primary")
        )
        released, local = release_partial_assembly(
            primary, _leg_device(mirror, mirror.primary, primary, disk), uuid_
        )
        actions += released
        array = _array_actions(profile, mirror, primary, local, replica_disks, remote_paths, uuid_)
        actions += array
        new_array = any(a.verb == "CreateArray" for a in array)
        actions += serving_actions(profile, index, mirror, primary, secrets, new_array)
    return Plan(tuple(with_mdadm_conf(actions, mdadm_conf_actions(profile, facts))))


def serving_actions(
    profile: Profile,
    index: int,
    mirror: Mirror,
    primary: SiteFacts,
    secrets: Mapping[str, str],
    new_array: bool = False,
) -> list[Action]:
    """What the primary serves on top of the array: the CDP stack, then the export."""
    try:
        actions = cdp_actions(profile, index, mirror, primary, new_array)
    except CdpPlanError as error:
        raise PlanError(str(error)) from None
    # With CDP, applications (and the export) use the volume on top of the mirror.
    exported = volume_path(mirror) if mirror.cdp is not None else mirror.md_device
    device = primary.disks.get(exported, DiskFacts(exported, exists=False))
    return actions + _export_actions(mirror, primary, device, secrets)


def _mdadm_conf_lines(profile: Profile, without: Mirror | None = None) -> dict[str, list[str]]:
    """remirror's lines in each site's mdadm.conf: ARRAY for a primary, <ignore> for a replica disk.

    `without`: a mirror being destroyed. Its primary's line turns into
    <ignore> as well: the disks still hold the array (destroy keeps data),
    and a boot must not assemble it until `apply` says so again. So does the
    line of a mirror whose primary leg has a cache (see below).
    """
    lines: dict[str, list[str]] = {site: [] for mirror in profile.mirrors for site in mirror.sites}
    for mirror in profile.mirrors:
        uuid_ = array_uuid(profile, mirror)
        for replica in mirror.replicas:
            lines[replica.site].append(f"ARRAY <ignore> UUID={uuid_}")
        # A primary leg behind a cache: its disk alone carries the array's superblock too,
        # but not what the cache holds. Assembling from it at boot would lose those writes:
        # apply assembles the array once the cache device exists.
        ignored = mirror is without or mirror.primary.cache is not None
        lines[mirror.primary.site].append(
            f"ARRAY <ignore> UUID={uuid_}"
            if ignored
            else f"ARRAY {mirror.md_device} metadata=1.2 UUID={uuid_} name={mirror.name}"
        )
    return lines


def mdadm_conf_actions(
    profile: Profile, facts: Mapping[str, SiteFacts], without: Mirror | None = None
) -> list[Action]:
    actions = []
    ours = {array_uuid(profile, m) for m in profile.mirrors}
    for site_name, lines in _mdadm_conf_lines(profile, without).items():
        if site_name not in facts:  # not reached (a forced promotion): its file is written when it is
            continue
        current = facts[site_name].mdadm_conf
        # A mirror dropped from the profile keeps its lines: its array may still run and its
        # disks still hold it (docs/safety.md, flow 9). Only a person removes them.
        kept = [line for uuid_, line in managed_lines(current).items() if uuid_ not in ours]
        wanted = managed_conf(current, lines + kept)
        if wanted != current:
            actions.append(
                Action(
                    site_name,
                    "WriteMdadmConf",
                    "/etc/mdadm/mdadm.conf (arrays assemble by name; replica disks never do)",
                    CHANGE,
                    (
                        {
                            "kind": "write_file",
                            "path": "/etc/mdadm/mdadm.conf",
                            "content": wanted,
                            "mode": 0o644,
                        },
                    ),
                )
            )
    return actions


def with_mdadm_conf(actions: list[Action], conf: list[Action]) -> list[Action]:
    """The plan's actions with the sites' new mdadm.conf around them.

    mdadm.conf says what boot and udev may assemble. A site that stops an
    array (to hand it over, or for good) gets its new file first: udev's
    incremental assembly would otherwise take the stopped legs again at the
    next change event (a leg record written, for one). The other sites get
    theirs last, once their arrays run.
    """
    stopping = {a.site for a in actions if a.verb == "StopArray"}
    return [a for a in conf if a.site in stopping] + actions + [a for a in conf if a.site not in stopping]


def _cache_actions(
    profile: Profile,
    mirror: Mirror,
    leg: PrimaryLeg | ReplicaLeg,
    site: SiteFacts,
    disk: DiskFacts,
    where: tuple[str | int, ...],
) -> list[Action]:
    try:
        return cache_actions(mirror, leg, site, disk, profile.where(*where, "cache"))
    except CacheError as error:
        raise PlanError(str(error)) from None


def _leg_device(mirror: Mirror, leg: PrimaryLeg | ReplicaLeg, site: SiteFacts, disk: DiskFacts) -> DiskFacts:
    """What md or LIO opens for the leg: its cache device, or its disk.

    A cache the same plan creates is not there yet: it shows the disk's
    contents (a cache is transparent), so the disk's signatures and md
    superblock stand in for it.
    """
    path = leg_device(mirror, leg, site.dm)
    if path == disk.path:
        return disk
    device = site.disks.get(path)
    if device is not None and device.exists:
        return device
    return dataclasses.replace(disk, path=path, kernel_name="", holders=(), mounts=(), openers=())


def _disk(profile: Profile, site: SiteFacts, path: str, where: tuple[str | int, ...]) -> DiskFacts:
    disk = site.disks.get(path)
    if disk is None or not disk.exists:
        raise PlanError(f"{profile.where(*where)}: site {site.name}: disk {path} does not exist")
    return disk


def _foreign(disk: DiskFacts, uuid_: str) -> list[Signature]:
    """Signatures that are not this mirror's own md superblock."""
    ours = disk.superblock is not None and disk.superblock.array_uuid == uuid_
    return [s for s in disk.signatures if not (ours and s.kind == "md")]


def _destroys(site: str, disk: DiskFacts, uuid_: str) -> str:
    found = _foreign(disk, uuid_)
    if not found:
        return ""
    return f"site {site}: {disk.path} holds " + ", ".join(dict.fromkeys(s.describe() for s in found))


def release_partial_assembly(site: SiteFacts, leg: DiskFacts, uuid_: str) -> tuple[list[Action], DiskFacts]:
    """Stop the inactive arrays holding a leg of the mirror; the leg without them.

    udev assembles arrays incrementally (`mdadm --incremental`) from the
    devices a change event shows: a leg record written to a stopped leg, a
    boot with the other legs away. What it builds stays inactive until every
    leg is there: it never ran, so it holds no write, but it holds the leg,
    and neither `mdadm --assemble` nor LIO can open it then.
    """
    if leg.superblock is None or leg.superblock.array_uuid != uuid_:
        return [], leg  # not the mirror's leg (yet): nothing of ours to free
    partial = [h for h in leg.holders if h in site.inactive_arrays]
    actions = [
        stop_array_action(
            site.name, f"/dev/{md}", f"inactive: assembled in part from {leg.path} by udev; never started"
        )
        for md in partial
    ]
    return actions, dataclasses.replace(leg, holders=tuple(h for h in leg.holders if h not in partial))


def stop_array_action(site: str, device: str, why: str) -> Action:
    """`mdadm --stop` of an array on `site`; `why` says what becomes of it (shown in the plan).
    md writes out its write-behind queue before the array stops."""
    return Action(
        site,
        "StopArray",
        f"{device} ({why})",
        DELETE,
        ({"kind": "run", "argv": ["mdadm", "--stop", device]},),
    )


def _stand_down_former_primary(mirror: Mirror, site: SiteFacts, leg: DiskFacts, uuid_: str) -> list[Action]:
    """A replica site still running the array on its own leg: a former primary, back after a
    forced promotion (docs/failover.md). Its array stops so that its leg can be exported to the
    new primary; whether that leg may then rejoin is the reconciler's judgement (split brain)."""
    array = site.array_named(mirror.name, uuid_)
    if array is None or not leg.kernel_name or array.member(leg.kernel_name) is None:
        return []
    users = site.disks.get(mirror.md_device, DiskFacts(mirror.md_device, False)).users()
    if users:
        raise PlanError(
            f"site {site.name} still runs {mirror.md_device} from before {mirror.primary.site} was"
            f" promoted, and it is in use ({'; '.join(users)}): stop what uses it there first"
        )
    return [
        stop_array_action(
            site.name, mirror.md_device, f"{array.kernel_name}: a former primary's; its leg keeps its data"
        )
    ]


def _replica_actions(
    profile: Profile,
    mirror: Mirror,
    replica: ReplicaLeg,
    site: SiteFacts,
    disk: DiskFacts,
    iqn: str,
    initiator: str,
    secrets: Mapping[str, str],
    uuid_: str,
) -> list[Action]:
    export = Export(
        site=site,
        iqn=iqn,
        backstore=backstore_name(mirror, replica),
        disk=disk,
        portal=replica.portal_address,
        initiators=(initiator,),
        chap=mirror.iscsi.chap,
    )
    return _target_actions(export, secrets, _destroys(site.name, disk, uuid_))


def _export_actions(
    mirror: Mirror, primary: SiteFacts, device: DiskFacts, secrets: Mapping[str, str]
) -> list[Action]:
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
                "CreateBackstore",
                f"{name} (block) on {disk.path}",
                steps=({"kind": "lio", "op": "create_backstore", "name": name, "dev": disk.path},),
                destructive=destructive,
                repair=True,  # a DR host's restart loses LIO's objects; the disk is checked above
            )
        )
    elif site.backstores[name] != disk.path:
        raise PlanError(
            f"site {site.name}: backstore {name} exists on {site.backstores[name]}, not {disk.path}"
        )
    target = site.targets.get(iqn)
    chap = export.chap
    if target is None:
        actions.append(
            Action(
                site.name,
                "CreateTarget",
                f"{iqn} (TPG 1, CHAP {'on' if chap else 'off'})",
                steps=({"kind": "lio", "op": "create_target", "iqn": iqn, "chap": chap is not None},),
                repair=True,
            )
        )
    portal = export.portal
    if target is None or f"{portal.address}:{portal.port}" not in target.portals:
        actions.append(
            Action(
                site.name,
                "CreatePortal",
                f"{portal} on {iqn}",
                steps=(
                    {
                        "kind": "lio",
                        "op": "create_portal",
                        "iqn": iqn,
                        "address": portal.address,
                        "port": portal.port,
                    },
                ),
                repair=True,
            )
        )
    if target is None or 0 not in target.luns:
        actions.append(
            Action(
                site.name,
                "CreateLun",
                f"LUN 0 -> {name} on {iqn}",
                steps=({"kind": "lio", "op": "create_lun", "iqn": iqn, "lun": 0, "backstore": name},),
                repair=True,
            )
        )
    wanted_chap: dict[str, str] = {}
    if chap is not None:
        wanted_chap = {"username": chap.username, "password": secrets[chap.password_file]}
        if chap.mutual:
            wanted_chap["mutual_username"] = chap.target_username
            wanted_chap["mutual_password"] = secrets[chap.target_password_file]
    wanted_acl = (
        wanted_chap.get("username", ""),
        secret_digest(wanted_chap["password"]) if "password" in wanted_chap else "",
        wanted_chap.get("mutual_username", ""),
        secret_digest(wanted_chap["mutual_password"]) if "mutual_password" in wanted_chap else "",
    )
    for initiator in export.initiators:
        acl_step: dict[str, Any] = {
            "kind": "lio",
            "op": "set_acl",
            "iqn": iqn,
            "initiator": initiator,
            "lun": 0,
        }
        if wanted_chap:
            acl_step["chap"] = wanted_chap
            acl_step["secrets"] = [v for k, v in wanted_chap.items() if "password" in k]
        acl = target.acls.get(initiator) if target else None
        if acl is None:
            actions.append(
                Action(site.name, "CreateNodeAcl", f"{initiator} on {iqn}", steps=(acl_step,), repair=True)
            )
        elif (
            acl.chap_userid,
            acl.chap_password,
            acl.chap_mutual_userid,
            acl.chap_mutual_password,
        ) != wanted_acl or 0 not in acl.mapped_luns:
            actions.append(
                Action(
                    site.name,
                    "UpdateNodeAcl",
                    f"{initiator} on {iqn} (CHAP)",
                    CHANGE,
                    (acl_step,),
                    repair=True,
                )
            )
    if actions:
        actions.append(save_lio_action(site))
    return actions


def logout_actions(profile: Profile, mirror: Mirror, primary: SiteFacts) -> list[Action]:
    """The primary's sessions to the mirror's replicas end, and their node records go."""
    actions = []
    for replica in mirror.replicas:
        iqn = profile.replica_iqn(mirror, replica)
        portal = replica.portal_address
        node_args = ["iscsiadm", "-m", "node", "-T", iqn, "-p", str(portal)]
        if primary.session_for(iqn, portal.address, portal.port) is not None:
            actions.append(
                Action(
                    primary.name,
                    "LogoutSession",
                    f"{iqn} at {portal}",
                    DELETE,
                    ({"kind": "run", "argv": [*node_args, "--logout"], "ok_codes": [0, 21]},),
                )
            )
        if primary.node_for(iqn, portal.address, portal.port) is not None:
            actions.append(
                Action(
                    primary.name,
                    "DeleteIscsiNode",
                    f"{iqn} at {portal}",
                    DELETE,
                    ({"kind": "run", "argv": [*node_args, "-o", "delete"], "ok_codes": [0, 21]},),
                )
            )
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
    return Action(
        site.name,
        "SaveLioConfig",
        site.lio_save_path,
        CHANGE,
        ({"kind": "lio", "op": "save", "path": site.lio_save_path},),
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
                "FenceTarget" if fence else "DeleteTarget",
                f"{iqn} (its portals, LUNs and ACLs{', and their sessions' if fence else ''})",
                DELETE,
                ({"kind": "lio", "op": "delete_target", "iqn": iqn},),
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
                "DeleteBackstore",
                f"{backstore} on {device} (the disk keeps its data)",
                DELETE,
                ({"kind": "lio", "op": "delete_backstore", "name": backstore},),
            )
        )
    if actions:
        actions.append(save_lio_action(site))
    return actions


def _node_settings(mirror: Mirror, secrets: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The node record remirror wants, and the secrets in it.

    `node.startup=manual`: boot never logs in to a replica leg (docs/safety.md, "Boot"). With
    the remote leg there at boot, udev's incremental assembly would put it together with the
    local leg before anyone judged them, and md keeps the leg with more events: after a split
    brain, one side's writes gone. remirror logs in itself (`watch`, `reconcile`, `apply`),
    after judging the legs.
    """
    settings = {"node.startup": "manual", **mirror.iscsi.node_settings(mirror.replication.on_link_loss)}
    chap = mirror.iscsi.chap
    if chap is None:
        return settings, []
    settings["node.session.auth.authmethod"] = "CHAP"
    settings["node.session.auth.username"] = chap.username
    settings["node.session.auth.password"] = secrets[chap.password_file]
    found = [secrets[chap.password_file]]
    if chap.mutual:
        settings["node.session.auth.username_in"] = chap.target_username
        settings["node.session.auth.password_in"] = secrets[chap.target_password_file]
        found.append(secrets[chap.target_password_file])
    return settings, found


def _initiator_actions(
    mirror: Mirror, replica: ReplicaLeg, primary: SiteFacts, iqn: str, secrets: Mapping[str, str]
) -> list[Action]:
    actions = []
    portal = replica.portal_address
    node_args = ["iscsiadm", "-m", "node", "-T", iqn, "-p", str(portal)]
    wanted, secret_values = _node_settings(mirror, secrets)
    current = primary.node_for(iqn, portal.address, portal.port)

    def shown(key: str, value: str) -> str:
        return secret_digest(value) if ".auth.password" in key else value

    changed = {k: v for k, v in wanted.items() if current is None or current.get(k) != shown(k, v)}
    steps: list[dict[str, Any]] = []
    if current is None:
        steps.append({"kind": "run", "argv": [*node_args, "-o", "new"]})
    steps += [
        {"kind": "run", "argv": [*node_args, "-o", "update", "-n", k, "-v", v]}
        for k, v in changed.items()
        if ".auth.password" not in k
    ]
    passwords = {k: v for k, v in changed.items() if ".auth.password" in k}
    if passwords:
        # Not through iscsiadm's argv, which every user of the host can read in `ps`.
        steps.append(
            {
                "kind": "node_secrets",
                "target": iqn,
                "address": portal.address,
                "port": portal.port,
                "values": passwords,
                "secrets": secret_values,
            }
        )
    if steps:
        verb, symbol = ("CreateIscsiNode", CREATE) if current is None else ("UpdateIscsiNode", CHANGE)
        keys = ", ".join(k.removeprefix("node.") for k in changed)
        actions.append(
            Action(primary.name, verb, f"{iqn} at {portal} ({keys})", symbol, tuple(steps), repair=True)
        )
    session = primary.session_for(iqn, portal.address, portal.port)
    logged_in = session is not None and session.state == "LOGGED_IN"
    # The replacement timeout (what `on_link_loss` chooses) is the one setting a
    # running session takes live, through sysfs. Any other change needs a new
    # login, and a logout fails the leg under md: so none is made for it alone.
    # node.startup only matters at boot: no new login for it either.
    relogin = any(k not in (REPLACEMENT_TIMEOUT, "node.startup") for k in changed)
    if session is not None and logged_in and not relogin:
        timeout = wanted[REPLACEMENT_TIMEOUT]
        if session.recovery_tmo is not None and str(session.recovery_tmo) != timeout:
            actions.append(
                Action(
                    primary.name,
                    "SetSessionTimeout",
                    f"session {session.sid} to {iqn}: replacement timeout {session.recovery_tmo}s"
                    f" -> {timeout}s, live",
                    CHANGE,
                    (
                        {
                            "kind": "write_sysfs",
                            "path": f"/sys/class/iscsi_session/session{session.sid}/recovery_tmo",
                            "value": timeout,
                        },
                    ),
                    repair=True,
                )
            )
    if not logged_in or relogin:
        login: list[dict[str, Any]] = []
        if session is not None and steps:
            # Node settings take effect at the next login.
            login.append({"kind": "run", "argv": [*node_args, "--logout"], "ok_codes": [0, 21]})
        login.append(
            {
                "kind": "run",
                "argv": [*node_args, "--login"],
                "ok_codes": [0, 15],
                "explain": {
                    str(ISCSIADM_AUTH_FAILED): f"CHAP authentication to target {iqn} at {portal} was refused"
                    " (check the CHAP secrets on both sites)"
                },
            }
        )
        login.append({"kind": "wait_path", "path": by_path(replica, iqn), "timeout": 60})
        actions.append(
            Action(primary.name, "LoginSession", f"{iqn} at {portal}", steps=tuple(login), repair=True)
        )
    return actions


def _array_actions(
    profile: Profile,
    mirror: Mirror,
    primary: SiteFacts,
    local: DiskFacts,
    replica_disks: list[DiskFacts],
    remote_paths: list[str],
    uuid_: str,
) -> list[Action]:
    replication = mirror.replication
    array = primary.array_named(mirror.name, uuid_)
    if array is None:
        if local.superblock is not None and local.superblock.array_uuid == uuid_:
            return [
                Action(
                    primary.name,
                    "AssembleArray",
                    f"{mirror.md_device} from {local.path} and {len(remote_paths)} replica(s)",
                    steps=(
                        assemble_step(mirror.md_device, uuid_, [local.path, *remote_paths]),
                        {"kind": "wait_path", "path": mirror.md_device, "timeout": 30},
                    ),
                )
            ]
        holders = [
            (disk, path)
            for disk, path in zip(replica_disks, remote_paths, strict=True)
            if disk.superblock is not None and disk.superblock.array_uuid == uuid_
        ]
        if holders:
            return _rebuild_primary_leg(mirror, primary, local, holders, uuid_)
        if local.users():
            raise PlanError(f"site {primary.name}: {local.path} is in use ({'; '.join(local.users())})")
        # Nothing of this mirror on any leg (else it is assembled or rebuilt above): every
        # signature, an md superblock of this mirror's too, is data a new array writes over.
        destroys = [d for d in [_destroys(primary.name, local, "")] if d]
        destroys += [_destroys(r.path, r, "") for r in replica_disks if r.signatures]
        argv = [
            "mdadm",
            "--create",
            mirror.md_device,
            "--run",
            "--metadata=1.2",
            "--level=1",
            f"--raid-devices={1 + len(remote_paths)}",
            f"--uuid={uuid_}",
            f"--name={mirror.name}",
            "--homehost=<none>",
            "--bitmap=internal",
            f"--bitmap-chunk={replication.bitmap_chunk // 1024}K",
            # Short of each leg's last MiB, the leg record's place (docs/failover.md).
            f"--size={md_size([local.size, *(r.size for r in replica_disks)]) // MiB}M",
        ]
        if replication.mode == "async":
            argv.append(f"--write-behind={replication.effective_write_behind}")
        argv += [local.path, "--write-mostly", *remote_paths]
        mode = (
            f"async, write-behind {replication.effective_write_behind}"
            if replication.mode == "async"
            else "sync"
        )
        return [
            Action(
                primary.name,
                "CreateArray",
                f"{mirror.md_device} RAID1 {local.path} + {len(remote_paths)} write-mostly leg(s), {mode}",
                steps=(
                    {"kind": "run", "argv": argv},
                    {"kind": "wait_path", "path": mirror.md_device, "timeout": 30},
                    {
                        "kind": "leg_record_create",
                        "mirror": mirror.name,
                        "array": uuid_,
                        "site": mirror.primary.site,
                        "devices": [local.path, *remote_paths],
                    },
                ),
                destructive="; ".join(destroys),
            )
        ]
    actions: list[Action] = []
    base = f"/sys/block/{array.kernel_name}/md"
    if array.bitmap_chunk != replication.bitmap_chunk:
        # No way to change a bitmap's chunk in place: drop it and add a new one.
        # Write-behind needs a bitmap, so the backlog is restored afterwards.
        steps: list[dict[str, Any]] = [
            {"kind": "run", "argv": ["mdadm", "--grow", mirror.md_device, "--bitmap=none"]},
            {
                "kind": "run",
                "argv": [
                    "mdadm",
                    "--grow",
                    mirror.md_device,
                    "--bitmap=internal",
                    f"--bitmap-chunk={replication.bitmap_chunk // 1024}K",
                ],
            },
        ]
        actions.append(
            Action(
                primary.name,
                "ChangeBitmap",
                f"{mirror.md_device} chunk -> {replication.bitmap_chunk // 1024}KiB",
                CHANGE,
                tuple(steps),
            )
        )
    if array.backlog != replication.effective_write_behind or actions:
        actions.append(
            Action(
                primary.name,
                "SetWriteBehind",
                f"{mirror.md_device} backlog {array.backlog} -> {replication.effective_write_behind}",
                CHANGE,
                (
                    {
                        "kind": "write_sysfs",
                        "path": f"{base}/bitmap/backlog",
                        "value": str(replication.effective_write_behind),
                    },
                ),
                repair=True,
            )
        )
    actions += _missing_leg_records(
        profile, mirror, primary, array, local, replica_disks, remote_paths, uuid_
    )
    for member in array.members:
        if member.device == local.kernel_name and member.is_write_mostly:
            # The primary's own leg, write-mostly from when it was a replica (before a promotion):
            # reads would go over the link.
            actions.append(
                Action(
                    primary.name,
                    "ClearWriteMostly",
                    f"{mirror.md_device} member {member.device} (the local leg: reads stay here)",
                    CHANGE,
                    (
                        {
                            "kind": "write_sysfs",
                            "path": f"{base}/dev-{member.device}/state",
                            "value": "-writemostly",
                        },
                    ),
                    repair=True,
                )
            )
        if member.device != local.kernel_name and not member.is_write_mostly and not member.is_faulty:
            actions.append(
                Action(
                    primary.name,
                    "SetWriteMostly",
                    f"{mirror.md_device} member {member.device}",
                    CHANGE,
                    (
                        {
                            "kind": "write_sysfs",
                            "path": f"{base}/dev-{member.device}/state",
                            "value": "writemostly",
                        },
                    ),
                    repair=True,
                )
            )
    return actions


def _missing_leg_records(
    profile: Profile,
    mirror: Mirror,
    primary: SiteFacts,
    array: MdArray,
    local: DiskFacts,
    replica_disks: list[DiskFacts],
    remote_paths: list[str],
    uuid_: str,
) -> list[Action]:
    """Generation 1 on the legs of a running array none of whose legs holds a leg record: its
    create was cut short before it wrote them (docs/failover.md). Without them it could never be
    promoted, and nothing would say so. The agent first checks that md leaves each leg's last
    MiB alone (an array made by hand may use it)."""
    if any(d.leg_record is not None and d.leg_record.array_uuid == uuid_ for d in [local, *replica_disks]):
        return []
    legs = [local]  # the legs in the array now; one out of it gets its record when it rejoins
    for replica, path, disk in zip(mirror.replicas, remote_paths, replica_disks, strict=True):
        portal = replica.portal_address
        session = primary.session_for(profile.replica_iqn(mirror, replica), portal.address, portal.port)
        member = array.member(session.disk) if session is not None and session.disk else None
        if member is not None and not member.is_faulty:
            legs.append(dataclasses.replace(disk, path=path))  # written through its session
    if not all(has_room_for_record(d) for d in legs):
        return []  # made before leg records, over the whole disk: status says it cannot be promoted
    members = [d.path for d in legs]
    step = {
        "kind": "leg_record_create",
        "mirror": mirror.name,
        "array": uuid_,
        "site": mirror.primary.site,
        "devices": members,
        "check_room": True,
    }
    return [
        Action(
            primary.name,
            "WriteLegRecords",
            f"{mirror.name} generation 1: {mirror.primary.site} primary, on {len(members)} leg(s) (never"
            " written: a create cut short; promote needs them)",
            CHANGE,
            (step,),
        )
    ]


def assemble_step(md: str, uuid_: str, devices: list[str]) -> dict[str, Any]:
    """The agent's `assemble_array`: `mdadm --assemble --run` past udev's partial assemblies."""
    return {"kind": "assemble_array", "md": md, "uuid": uuid_, "devices": devices}


def _rebuild_primary_leg(
    mirror: Mirror,
    primary: SiteFacts,
    local: DiskFacts,
    holders: list[tuple[DiskFacts, str]],
    uuid_: str,
) -> list[Action]:
    """The primary's leg holds nothing of the mirror (a new disk in a dead one's place) while
    replica legs hold its data: run the array from them and copy it all onto the new disk.

    Never a new array: `mdadm --create` with its initial sync would copy the blank disk over
    the replicas. The legs used are those whose leg record knows the newest generation.
    """
    newest = max((d.leg_record.current.n for d, _ in holders if d.leg_record is not None), default=None)
    if newest is not None:
        holders = [
            (d, p) for d, p in holders if d.leg_record is not None and d.leg_record.current.n == newest
        ]
    if local.users():
        raise PlanError(f"site {primary.name}: {local.path} is in use ({'; '.join(local.users())})")
    smallest = min(d.size for d, _ in holders)
    if local.size < smallest:
        raise PlanError(
            f"site {primary.name}: {local.path} ({local.size} bytes) is smaller than the replica leg"
            f" holding {mirror.md_device} ({smallest} bytes): it cannot take the mirror's data"
        )
    sources = [p for _, p in holders]
    return [
        Action(
            primary.name,
            "AssembleArray",
            f"{mirror.md_device} from the replica leg(s) alone ({', '.join(sources)}):"
            f" {local.path} holds no copy of the mirror (a new disk?)",
            steps=(
                assemble_step(mirror.md_device, uuid_, sources),
                {"kind": "wait_path", "path": mirror.md_device, "timeout": 30},
            ),
        ),
        Action(
            primary.name,
            "RebuildLeg",
            f"{local.path} into {mirror.md_device} (in full: every block copied from the replica leg)",
            CHANGE,
            (
                {"kind": "run", "argv": ["mdadm", mirror.md_device, "--add", local.path]},
                {"kind": "leg_record_join", "source": sources[0], "device": local.path},
            ),
            destructive=_destroys(primary.name, local, ""),
        ),
    ]


def managed_conf(current: str, lines: list[str]) -> str:
    """`current` with remirror's block replaced, appended, or removed when there are no lines."""
    block = "\n".join([CONF_BEGIN, *lines, CONF_END]) + "\n" if lines else ""
    if CONF_BEGIN in current and CONF_END in current:
        head, _, rest = current.partition(CONF_BEGIN)
        _, _, tail = rest.partition(CONF_END + "\n") if CONF_END + "\n" in rest else rest.partition(CONF_END)
        return head + block + tail
    if not block:
        return current
    separator = "" if not current or current.endswith("\n") else "\n"
    return current + separator + block
