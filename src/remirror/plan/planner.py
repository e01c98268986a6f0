"""Diff a profile against the sites' facts into an ordered plan. Pure: no I/O.

Names remirror gives things, derived so that any controller derives the
same ones: the array UUID (uuid5 of profile and mirror names: known before
the array exists, so a plan can name it and adopt it), the LIO backstore
`MIRROR-SITE`, and the replica target IQN (profile.replica_iqn).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from typing import Any

from remirror.errors import RemirrorError
from remirror.facts.model import Signature
from remirror.facts.site import DiskFacts, SiteFacts
from remirror.plan.actions import CHANGE, CREATE, Action, Plan
from remirror.profile.model import Mirror, Profile, ReplicaLeg

# Fixed forever: changing it would change every derived array UUID.
_UUID_NAMESPACE = uuid.UUID("6f1d3c2e-2b1a-4d6e-9a57-72656d697272")
CONF_BEGIN = "# BEGIN remirror: managed by remirror apply, do not edit"
CONF_END = "# END remirror"
ISCSIADM_AUTH_FAILED = 24


class PlanError(RemirrorError):
    """The sites are in a state the plan cannot reconcile (a missing disk, a name taken by something else)."""


def array_uuid(profile: Profile, mirror: Mirror) -> str:
    """The md array UUID in mdadm's colon form, derived from the names."""
    raw = uuid.uuid5(_UUID_NAMESPACE, f"{profile.name}/{mirror.name}").hex
    return ":".join(raw[i : i + 8] for i in range(0, 32, 8))


def backstore_name(mirror: Mirror, replica: ReplicaLeg) -> str:
    """The LIO backstore exporting a replica disk."""
    return f"{mirror.name}-{replica.site}"


def by_path(replica: ReplicaLeg, iqn: str) -> str:
    """The udev link of the replica's LUN 0 on the primary."""
    portal = replica.portal_address
    return f"/dev/disk/by-path/ip-{portal.address}:{portal.port}-iscsi-{iqn}-lun-0"


def digest(secret: str) -> str:
    """How the agent reports a stored secret: compared, never shown."""
    return "sha256:" + hashlib.sha256(secret.encode()).hexdigest()


def make_plan(profile: Profile, facts: Mapping[str, SiteFacts], secrets: Mapping[str, str]) -> Plan:
    """The actions that make the sites match the profile, replica sides first for each mirror."""
    actions: list[Action] = []
    conf_lines: dict[str, list[str]] = {}
    for index, mirror in enumerate(profile.mirrors):
        uuid_ = array_uuid(profile, mirror)
        primary = facts[mirror.primary.site]
        if primary.initiator is None:
            raise PlanError(
                f"site {primary.name}: no initiator name in /etc/iscsi/initiatorname.iscsi"
                " (is open-iscsi installed?)"
            )
        remote_paths = []
        replica_disks: list[DiskFacts] = []
        for r, replica in enumerate(mirror.replicas):
            site = facts[replica.site]
            disk = _disk(profile, site, replica.disk, ("mirrors", index, "replicas", r, "disk"))
            replica_disks.append(disk)
            iqn = profile.replica_iqn(mirror, replica)
            actions += _replica_actions(
                profile, mirror, replica, site, disk, iqn, primary.initiator, secrets, uuid_
            )
            actions += _initiator_actions(mirror, replica, primary, iqn, secrets)
            remote_paths.append(by_path(replica, iqn))
            conf_lines.setdefault(replica.site, []).append(f"ARRAY <ignore> UUID={uuid_}")
        local = _disk(profile, primary, mirror.primary.disk, ("mirrors", index, "primary", "disk"))
        actions += _array_actions(profile, mirror, primary, local, replica_disks, remote_paths, uuid_)
        conf_lines.setdefault(mirror.primary.site, []).append(
            f"ARRAY {mirror.md_device} metadata=1.2 UUID={uuid_} name={mirror.name}"
        )
    for site_name, lines in conf_lines.items():
        current = facts[site_name].mdadm_conf
        wanted = managed_conf(current, lines)
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
    return Plan(tuple(actions))


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
    if not site.lio_available:
        raise PlanError(f"site {site.name}: LIO is not available (load target_core_mod and mount configfs)")
    actions = []
    name = backstore_name(mirror, replica)
    portal = replica.portal_address
    if name not in site.backstores:
        if disk.holders:
            raise PlanError(f"site {site.name}: {disk.path} is in use by {', '.join(disk.holders)}")
        actions.append(
            Action(
                site.name,
                "CreateBackstore",
                f"{name} (block) on {disk.path}",
                steps=({"kind": "lio", "op": "create_backstore", "name": name, "dev": disk.path},),
                destructive=_destroys(site.name, disk, uuid_),
            )
        )
    elif site.backstores[name] != disk.path:
        raise PlanError(
            f"site {site.name}: backstore {name} exists on {site.backstores[name]}, not {disk.path}"
        )
    target = site.targets.get(iqn)
    chap = mirror.iscsi.chap
    if target is None:
        actions.append(
            Action(
                site.name,
                "CreateTarget",
                f"{iqn} (TPG 1, CHAP {'on' if chap else 'off'})",
                steps=({"kind": "lio", "op": "create_target", "iqn": iqn, "chap": chap is not None},),
            )
        )
    if target is None or str(portal) not in target.portals:
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
            )
        )
    if target is None or 0 not in target.luns:
        actions.append(
            Action(
                site.name,
                "CreateLun",
                f"LUN 0 -> {name} on {iqn}",
                steps=({"kind": "lio", "op": "create_lun", "iqn": iqn, "lun": 0, "backstore": name},),
            )
        )
    acl_step: dict[str, Any] = {"kind": "lio", "op": "set_acl", "iqn": iqn, "initiator": initiator, "lun": 0}
    wanted_chap: dict[str, str] = {}
    if chap is not None:
        wanted_chap = {"username": chap.username, "password": secrets[chap.password_file]}
        if chap.mutual:
            wanted_chap["mutual_username"] = chap.target_username
            wanted_chap["mutual_password"] = secrets[chap.target_password_file]
        acl_step["chap"] = wanted_chap
        acl_step["secrets"] = [v for k, v in wanted_chap.items() if "password" in k]
    acl = target.acls.get(initiator) if target else None
    if acl is None:
        actions.append(Action(site.name, "CreateNodeAcl", f"{initiator} on {iqn}", steps=(acl_step,)))
    elif (acl.chap_userid, acl.chap_password, acl.chap_mutual_userid, acl.chap_mutual_password) != (
        wanted_chap.get("username", ""),
        digest(wanted_chap["password"]) if "password" in wanted_chap else "",
        wanted_chap.get("mutual_username", ""),
        digest(wanted_chap["mutual_password"]) if "mutual_password" in wanted_chap else "",
    ) or 0 not in acl.mapped_luns:
        actions.append(
            Action(site.name, "UpdateNodeAcl", f"{initiator} on {iqn} (CHAP)", CHANGE, (acl_step,))
        )
    if actions:
        actions.append(
            Action(
                site.name,
                "SaveLioConfig",
                site.lio_save_path,
                CHANGE,
                ({"kind": "lio", "op": "save", "path": site.lio_save_path},),
            )
        )
    return actions


def _node_settings(mirror: Mirror, secrets: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The node record remirror wants, and the secrets in it."""
    settings = {"node.startup": "automatic", **mirror.iscsi.node_settings(mirror.replication.on_link_loss)}
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
        return digest(value) if ".auth.password" in key else value

    changed = {k: v for k, v in wanted.items() if current is None or current.get(k) != shown(k, v)}
    steps: list[dict[str, Any]] = []
    if current is None:
        steps.append({"kind": "run", "argv": [*node_args, "-o", "new"]})
    # A secret in argv shows in `ps` on this host for the instant iscsiadm
    # runs; remirror's own logs and errors redact it.
    steps += [
        {"kind": "run", "argv": [*node_args, "-o", "update", "-n", k, "-v", v], "secrets": secret_values}
        for k, v in changed.items()
    ]
    if steps:
        verb, symbol = ("CreateIscsiNode", CREATE) if current is None else ("UpdateIscsiNode", CHANGE)
        keys = ", ".join(k.removeprefix("node.") for k in changed)
        actions.append(Action(primary.name, verb, f"{iqn} at {portal} ({keys})", symbol, tuple(steps)))
    session = primary.session_for(iqn, portal.address, portal.port)
    if session is None or session.state != "LOGGED_IN" or steps:
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
        actions.append(Action(primary.name, "LoginSession", f"{iqn} at {portal}", steps=tuple(login)))
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
                        {
                            "kind": "run",
                            "argv": [
                                "mdadm",
                                "--assemble",
                                mirror.md_device,
                                f"--uuid={uuid_}",
                                "--run",
                                local.path,
                                *remote_paths,
                            ],
                        },
                        {"kind": "wait_path", "path": mirror.md_device, "timeout": 30},
                    ),
                )
            ]
        destroys = [d for d in [_destroys(primary.name, local, uuid_)] if d]
        destroys += [_destroys(r.path, r, uuid_) for r in replica_disks if _foreign(r, uuid_)]
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
                ),
                destructive="; ".join(destroys),
            )
        ]
    actions = []
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
            )
        )
    for member in array.members:
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
                )
            )
    return actions


def managed_conf(current: str, lines: list[str]) -> str:
    """`current` with remirror's block of lines replaced (or appended), everything else kept."""
    block = "\n".join([CONF_BEGIN, *lines, CONF_END]) + "\n"
    if CONF_BEGIN in current and CONF_END in current:
        head, _, rest = current.partition(CONF_BEGIN)
        _, _, tail = rest.partition(CONF_END + "\n") if CONF_END + "\n" in rest else rest.partition(CONF_END)
        return head + block + tail
    separator = "" if not current or current.endswith("\n") else "\n"
    return current + separator + block
