"""A model of what each step does to a site's facts, for the planner's idempotence property.

`Sites(facts).run(plan)` returns the facts the sites would have after the
plan ran, interpreting each step the way the kernel and the tools would
change what the agent observes. It models only what the planner looks at;
the lab tests check the real thing.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from remirror.facts.cdp import stack_names
from remirror.facts.dm import parse_dm_table
from remirror.facts.generations import LegRecord, first_record
from remirror.facts.mdadm_conf import merged_conf
from remirror.facts.model import (
    CacheStatus,
    IscsiSession,
    MdArray,
    MdMember,
    MdSuperblock,
    Signature,
    secret_digest,
)
from remirror.facts.site import DiskFacts, DmDevice, LioAcl, LioTarget, SiteFacts
from remirror.facts.wireguard import WireguardInterface, WireguardPeer
from remirror.plan import Action, Plan
from remirror.profile.timeouts import REPLACEMENT_TIMEOUT
from remirror.protocol import decode
from remirror.protocol.commands import Command
from remirror.protocol.lio import LIO_STEPS
from remirror.protocol.steps import ArrayLine
from remirror.protocol.tables import DmTarget
from remirror.protocol.wire import from_wire

_BY_PATH = re.compile(r"^/dev/disk/by-path/ip-(?P<portal>.+)-iscsi-(?P<iqn>.+)-lun-0$")


class Sites:
    """Simulated sites: their facts, and what their disks remember that facts do not show."""

    def __init__(self, facts: Mapping[str, SiteFacts]) -> None:
        self.facts = dict(facts)
        # An array's bitmap chunk and write-behind live in its superblocks:
        # assembling the array brings them back.
        self.on_disk: dict[str, tuple[int, int]] = {}
        # And each leg's slot (by the path the plan names it with): assembling keeps it.
        self.slots: dict[str, dict[str, int]] = {}

    def run(self, plan: Plan) -> dict[str, SiteFacts]:
        """Run every step of the plan; the facts afterwards."""
        for action in plan.actions:
            for step in wire(action):
                step = as_run(step)
                if step["kind"] == "assemble_array":  # the agent's step: `mdadm --assemble --run`
                    argv = [
                        "mdadm",
                        "--assemble",
                        step["md"],
                        f"--uuid={step['uuid']}",
                        "--run",
                        *step["devices"],
                    ]
                    self.facts = _mdadm(self.facts, action.site, argv, self.on_disk, self.slots)
                elif step["kind"] == "run" and step["argv"][0] == "mdadm":
                    self.facts = _mdadm(self.facts, action.site, step["argv"], self.on_disk, self.slots)
                elif step["kind"] == "local_leg_last":
                    self.facts = _local_leg_last(self.facts, action.site, step, self.slots)
                elif step["kind"] == "add_replica_legs":  # the agent's: each added, then re-added
                    for device in step["devices"]:
                        argv = ["mdadm", step["md"], "--add", device]
                        self.facts = _mdadm(self.facts, action.site, argv, self.on_disk, self.slots)
                elif step["kind"] == "run" and step["argv"][0] in ("dmsetup", "dd"):
                    self.facts = _dm_run(self.facts, action.site, step["argv"])
                else:
                    self.facts = _STEPS[step["kind"]](self.facts, action.site, step)
        return self.facts


def as_run(step: dict[str, Any]) -> dict[str, Any]:
    """A step as the site carries it out: a command as the argv the site builds from its fields
    (`{"kind": "run", "argv": [...]}`), any other step as it was sent."""
    command = decode(step)
    return {"kind": "run", "argv": list(command.argv())} if isinstance(command, Command) else step


def conf_text(action: Action) -> str:
    """The lines an action's `mdadm_conf` step puts in remirror's block, as the site writes them."""
    (step,) = wire(action)
    return "\n".join(from_wire(ArrayLine, line).text() for line in step["arrays"])


def at_site(action: Action) -> list[dict[str, Any]]:
    """The action's steps as its site carries them out (`as_run` of each step sent)."""
    return [as_run(step) for step in wire(action)]


def wire(action: Action) -> list[dict[str, Any]]:
    """The action's steps as the agent receives them (the controller's `as_dict`, through JSON),
    each read back by the catalogue as the agent reads it, to the step the planner built."""
    sent = [json.loads(json.dumps(step.as_dict())) for step in action.steps]
    for step, obj in zip(action.steps, sent, strict=True):
        assert decode(obj) == step, f"{step!r} does not cross the wire as itself"
    return sent


def bare_site(name: str, initiator: str, disks: Mapping[str, DiskFacts], lio_save_path: str) -> SiteFacts:
    """A site with its disks and LIO, and nothing remirror makes: no array, session, record or target."""
    return SiteFacts(
        name=name,
        hostname=name,
        initiator=initiator,
        disks=dict(disks),
        arrays=(),
        array_links={},
        sessions=(),
        nodes={},
        lio_available=True,
        backstores={},
        targets={},
        lio_save_path=lio_save_path,
    )


def _replace(sites: dict[str, SiteFacts], name: str, **changes: Any) -> dict[str, SiteFacts]:
    return {**sites, name: dataclasses.replace(sites[name], **changes)}


def _nothing(sites: dict[str, SiteFacts], _name: str, _step: dict[str, Any]) -> dict[str, SiteFacts]:
    return sites


def _mdadm_conf(sites: dict[str, SiteFacts], name: str, step: dict[str, Any]) -> dict[str, SiteFacts]:
    """The agent's `mdadm_conf`: remirror's block of the site's file, the rest as it was."""
    lines = [from_wire(ArrayLine, line).text() for line in step["arrays"]]
    return _replace(sites, name, mdadm_conf=merged_conf(sites[name].mdadm_conf, lines))


def _array_named(site: SiteFacts, md: str) -> MdArray:
    """The array a step names: by its kernel node (`/dev/md127`) or its link (`/dev/md/NAME`)."""
    kernel = md.removeprefix("/dev/")
    (array,) = [
        a
        for a in site.arrays
        if a.kernel_name == kernel or md.removeprefix("/dev/md/") in site.array_links[a.kernel_name]
    ]
    return array


def _md_attribute(sites: dict[str, SiteFacts], name: str, step: dict[str, Any]) -> dict[str, SiteFacts]:
    """The agent's `md_attribute`: one of an array's settings, or a repair of one."""
    site = sites[name]
    array = _array_named(site, step["md"])
    attribute, value = step["attribute"], step["value"]
    if attribute == "bitmap/backlog":
        changed = dataclasses.replace(array, backlog=int(value))
    elif attribute in ("sync_speed_max", "sync_speed_min"):
        changed = _speed_limited(array, attribute, value)
    elif attribute == "suspend_hi":  # at or below suspend_lo (0): no write is held
        changed = dataclasses.replace(array, writes_suspended=int(value) > 0)
    elif attribute == "sync_max":
        changed = dataclasses.replace(array, syncs_held=False)
    elif attribute == "safe_mode_delay":
        changed = dataclasses.replace(array, safe_mode_delay=float(value))
    else:
        assert (attribute, value) == ("sync_action", "idle"), step
        changed = dataclasses.replace(array, sync_action="idle")
    return _replace(sites, name, arrays=tuple(changed if a is array else a for a in site.arrays))


def _session_timeout(sites: dict[str, SiteFacts], name: str, step: dict[str, Any]) -> dict[str, SiteFacts]:
    sessions = tuple(
        dataclasses.replace(s, recovery_tmo=step["seconds"]) if s.sid == step["session"] else s
        for s in sites[name].sessions
    )
    assert any(s.sid == step["session"] and s.target == step["target"] for s in sessions), step
    return _replace(sites, name, sessions=sessions)


def _lio(sites: dict[str, SiteFacts], name: str, step: dict[str, Any]) -> dict[str, SiteFacts]:
    """The LIO operations (`lio_OP`)."""
    site = sites[name]
    targets = dict(site.targets)
    backstores = dict(site.backstores)
    op = step["kind"].removeprefix("lio_")
    if op == "create_backstore":
        assert step["name"] not in backstores
        backstores[step["name"]] = step["dev"]
    elif op == "delete_backstore":
        del backstores[step["name"]]
    elif op == "create_target":
        assert step["iqn"] not in targets
        targets[step["iqn"]] = LioTarget(
            True, (), {}, "1" if step["chap"] else "0", {}, dict(step.get("parameters", {}))
        )
    elif op == "set_parameters":
        target = targets[step["iqn"]]
        targets[step["iqn"]] = dataclasses.replace(
            target, parameters={**target.parameters, **step["parameters"]}
        )
    elif op == "delete_target":
        del targets[step["iqn"]]
    elif op == "create_portal":
        target = targets[step["iqn"]]
        targets[step["iqn"]] = dataclasses.replace(
            target, portals=(*target.portals, f"{step['address']}:{step['port']}")
        )
    elif op == "create_lun":
        target = targets[step["iqn"]]
        assert step["backstore"] in backstores
        targets[step["iqn"]] = dataclasses.replace(
            target, luns={**target.luns, step["lun"]: step["backstore"]}
        )
    elif op == "set_acl":
        target = targets[step["iqn"]]
        chap = step.get("chap") or {}
        acl = LioAcl(
            chap.get("username", ""),
            secret_digest(chap["password"]) if chap.get("password") else "",
            chap.get("mutual_username", ""),
            secret_digest(chap["mutual_password"]) if chap.get("mutual_password") else "",
            (0,),
        )
        targets[step["iqn"]] = dataclasses.replace(target, acls={**target.acls, step["initiator"]: acl})
    else:
        assert op == "save", op
    return _replace(sites, name, targets=targets, backstores=backstores)


def node_updates(argv: list[str]) -> dict[str, str]:
    """The settings an `iscsiadm -m node ... -o update -n K -v V [-n K -v V ...]` makes."""
    at = argv.index("update") + 1
    pairs = argv[at:]
    assert len(pairs) % 4 == 0, argv
    assert pairs[0::4] == ["-n"] * (len(pairs) // 4), argv
    assert pairs[2::4] == ["-v"] * (len(pairs) // 4), argv
    return dict(zip(pairs[1::4], pairs[3::4], strict=True))


def _iscsiadm(sites: dict[str, SiteFacts], name: str, step: dict[str, Any]) -> dict[str, SiteFacts]:
    argv: list[str] = step["argv"]
    assert argv[0] == "iscsiadm", argv
    site = sites[name]
    iqn, portal = argv[argv.index("-T") + 1], argv[argv.index("-p") + 1]
    address, _, port = portal.rpartition(":")
    key = (iqn, f"{address},{port},1")
    nodes = {k: dict(v) for k, v in site.nodes.items()}
    sessions = list(site.sessions)
    if argv[-1] in ("--login", "--logout") or argv[-2:] == ["-o", "delete"]:
        sessions = [s for s in sessions if (s.target, s.address, s.port) != (iqn, address, int(port))]
    if argv[-2:] == ["-o", "new"]:
        nodes[key] = {}
    elif "update" in argv:
        for setting, value in node_updates(argv).items():
            assert ".auth.password" not in setting, "a secret in argv"
            nodes[key][setting] = value
    elif argv[-2:] == ["-o", "delete"]:
        del nodes[key]
    elif argv[-1] == "--login":
        assert key in nodes, "login without a node record"
        sid = 1 + max((s.sid for s in site.sessions), default=0)
        # The kernel names the new disk afresh: never a name md still holds.
        held = {m.device for a in site.arrays for m in a.members} | {s.disk for s in sessions}
        disk = next(f"sd{c}" for c in "abcdefghijklmnopqrstuvwxyz"[sid:] if f"sd{c}" not in held)
        timeout = nodes[key].get(REPLACEMENT_TIMEOUT)  # what iscsid hands the kernel at login
        session = IscsiSession(
            sid, iqn, address, int(port), "LOGGED_IN", disk, int(timeout) if timeout else None
        )
        sessions.append(_negotiate(sites, session, nodes[key]))
    else:
        assert argv[-1] == "--logout", argv
    sites = _replace(sites, name, nodes=nodes, sessions=tuple(sessions))
    if argv[-1] in ("--login", "--logout"):
        sites = _mark_logged_in(sites, iqn, site.initiator or "", argv[-1] == "--login")
    return sites


def _negotiate(sites: dict[str, SiteFacts], session: IscsiSession, node: dict[str, str]) -> IscsiSession:
    """What a login agrees with the target (RFC 7143: InitialR2T is Yes if either side asks for it,
    ImmediateData only if both offer it, the first burst the smaller), open-iscsi's and LIO's
    defaults where a side says nothing; the new disk has the kernel's scheduler for it."""
    target = next((s.targets[session.target] for s in sites.values() if session.target in s.targets), None)
    offered = target.parameters if target is not None else {}
    ours = {k.removeprefix("node.session.iscsi."): v for k, v in node.items()}
    return dataclasses.replace(
        session,
        initial_r2t="Yes" in (ours.get("InitialR2T", "No"), offered.get("InitialR2T", "Yes")),
        immediate_data=ours.get("ImmediateData", "Yes") == offered.get("ImmediateData", "Yes") == "Yes",
        first_burst=min(
            int(ours.get("FirstBurstLength", "262144")), int(offered.get("FirstBurstLength", "65536"))
        ),
        scheduler="mq-deadline",
    )


def _speed_limited(array: MdArray, attribute: str, value: str) -> MdArray:
    """md's sync_speed_max or _min written: KiB/s of the array's own, or `system` for none."""
    limit = None if value == "system" else int(value) * 1024
    if attribute == "sync_speed_min":
        return dataclasses.replace(array, sync_speed_min=limit)
    return dataclasses.replace(array, sync_speed_max=limit)


def _disk_sysfs(sites: dict[str, SiteFacts], name: str, step: dict[str, Any]) -> dict[str, SiteFacts]:
    """The agent's `disk_sysfs`: a replica leg's disk (by its by-path link) gets another scheduler."""
    remote = _BY_PATH.match(step["device"])
    assert remote is not None, step
    assert step["attribute"] == "queue/scheduler", step
    sessions = tuple(
        dataclasses.replace(s, scheduler=step["value"]) if s.target == remote["iqn"] else s
        for s in sites[name].sessions
    )
    return _replace(sites, name, sessions=sessions)


def _mark_logged_in(
    sites: dict[str, SiteFacts], iqn: str, initiator: str, logged_in: bool
) -> dict[str, SiteFacts]:
    """The target side sees the session too: its ACL for the initiator shows it."""
    for name, site in sites.items():
        target = site.targets.get(iqn)
        if target is not None and initiator in target.acls:
            acl = dataclasses.replace(target.acls[initiator], logged_in=logged_in)
            changed = dataclasses.replace(target, acls={**target.acls, initiator: acl})
            sites = _replace(sites, name, targets={**site.targets, iqn: changed})
    return sites


def _node_secrets(sites: dict[str, SiteFacts], name: str, step: dict[str, Any]) -> dict[str, SiteFacts]:
    key = (step["target"], f"{step['address']},{step['port']},1")
    nodes = {k: dict(v) for k, v in sites[name].nodes.items()}
    nodes[key].update({k: secret_digest(v) for k, v in step["values"].items()})
    return _replace(sites, name, nodes=nodes)


def _mdadm(
    sites: dict[str, SiteFacts],
    name: str,
    argv: list[str],
    on_disk: dict[str, tuple[int, int]],
    slots: dict[str, dict[str, int]],
) -> dict[str, SiteFacts]:
    site = sites[name]
    if argv[2] in ("--remove", "--re-add", "--fail"):
        return _manage(sites, name, argv)
    if argv[2] == "--add" and _BY_PATH.match(argv[3]):  # a replica leg into a new array's free slot
        return _add_replica_leg(sites, name, argv, slots)
    device = argv[2]
    md_name = device.removeprefix("/dev/md/")
    if argv[1] == "--stop":
        kernel = next(k for k, links in site.array_links.items() if md_name in links)
        return _replace(sites, name, arrays=tuple(a for a in site.arrays if a.kernel_name != kernel))
    if argv[1] == "--grow":
        (array,) = [a for a in site.arrays if md_name in site.array_links[a.kernel_name]]
        chunk = next((a for a in argv if a.startswith("--bitmap-chunk=")), None)
        grown = dataclasses.replace(
            array,
            bitmap_chunk=int(chunk.split("=")[1].removesuffix("K")) * 1024 if chunk else None,
            backlog=0 if chunk else None,  # a new bitmap starts without write-behind
        )
        return _replace(sites, name, arrays=tuple(grown if a is array else a for a in site.arrays))
    uuid_ = next(a.split("=", 1)[1] for a in argv if a.startswith("--uuid="))
    legs = [a for a in argv[3:] if a.startswith("/dev/") or a == "missing"]
    if argv[1] == "--create":
        slots[uuid_] = {leg: slot for slot, leg in enumerate(legs) if leg != "missing"}
    elif uuid_ in slots:  # md takes each leg's slot from its superblock, whatever the order named
        legs = sorted(legs, key=lambda leg: slots[uuid_].get(leg, len(legs)))
    members = []
    for slot, leg in enumerate(legs):
        if leg == "missing":  # a slot a later `--add` fills
            continue
        remote = _BY_PATH.match(leg)
        if remote is None:
            sites = _with_superblock(sites, name, leg, uuid_, md_name)
            members.append(MdMember(site.disks[leg].kernel_name, slot, frozenset({"in_sync"})))
            continue
        sites = _remote_superblock(sites, remote["iqn"], uuid_, md_name)
        session = next(s for s in sites[name].sessions if s.target == remote["iqn"])
        members.append(MdMember(session.disk or "", slot, frozenset({"in_sync", "write_mostly"})))
    if argv[1] == "--create":
        chunk = next(a for a in argv if a.startswith("--bitmap-chunk="))
        behind = next((a for a in argv if a.startswith("--write-behind=")), "--write-behind=0")
        bitmap, backlog = int(chunk.split("=")[1].removesuffix("K")) * 1024, int(behind.split("=")[1])
    else:
        assert argv[1] == "--assemble", argv
        bitmap, backlog = on_disk[uuid_]
    on_disk[uuid_] = (bitmap, backlog)
    kernel = f"md{127 - len(sites[name].arrays)}"
    array = MdArray(
        kernel,
        md_name,
        uuid_,
        "raid1",
        len(legs),
        tuple(members),
        "clean",
        "idle",
        None,
        0,
        bitmap,
        backlog,
        0,
        safe_mode_delay=0.204,  # md's 0.2 s at every create and assembly (Debian 12's 6.1, HZ 250)
    )
    site = sites[name]
    return _replace(
        sites,
        name,
        arrays=(*site.arrays, array),
        array_links={**site.array_links, kernel: (md_name,)},
    )


def _add_replica_leg(
    sites: dict[str, SiteFacts], name: str, argv: list[str], slots: dict[str, dict[str, int]]
) -> dict[str, SiteFacts]:
    """`mdadm MD --add PATH`: the first free slot, its recovery taken as done."""
    site = sites[name]
    md_name = argv[1].removeprefix("/dev/md/")
    (array,) = [a for a in site.arrays if md_name in site.array_links[a.kernel_name]]
    remote = _BY_PATH.match(argv[3])
    assert remote is not None, argv
    sites = _remote_superblock(sites, remote["iqn"], array.uuid, md_name)
    session = next(s for s in sites[name].sessions if s.target == remote["iqn"])
    slot = next(i for i in range(array.raid_disks) if i not in [m.slot for m in array.members])
    slots.setdefault(array.uuid, {})[argv[3]] = slot
    member = MdMember(session.disk or "", slot, frozenset({"in_sync"}))
    added = dataclasses.replace(array, members=(*array.members, member))
    return _replace(sites, name, arrays=tuple(added if a is array else a for a in sites[name].arrays))


def _local_leg_last(
    sites: dict[str, SiteFacts], name: str, step: dict[str, Any], slots: dict[str, dict[str, int]]
) -> dict[str, SiteFacts]:
    """The agent's `local_leg_last`: the other legs pack down in order, the local leg goes last."""
    site = sites[name]
    md_name = step["md"].removeprefix("/dev/md/")
    (array,) = [a for a in site.arrays if md_name in site.array_links[a.kernel_name]]
    local = site.disks[step["device"]].kernel_name
    order = sorted(array.members, key=lambda m: (m.device == local, m.slot))
    members = tuple(dataclasses.replace(m, slot=i) for i, m in enumerate(order))
    known = slots.get(array.uuid, {})
    for path, slot in sorted(known.items(), key=lambda item: (item[0] == step["device"], item[1])):
        known[path] = len([p for p, s in known.items() if s < slot and p != step["device"]])
    known[step["device"]] = len(members) - 1
    moved = dataclasses.replace(array, members=members)
    return _replace(sites, name, arrays=tuple(moved if a is array else a for a in site.arrays))


def _replica_member(site: SiteFacts, step: dict[str, Any]) -> tuple[MdArray, str]:
    """The array a step names (`md`) and the kernel name of the replica leg it names (`device`,
    its by-path link): the disk of that target's session."""
    md_name = step["md"].removeprefix("/dev/md/")
    (array,) = [a for a in site.arrays if md_name in site.array_links[a.kernel_name]]
    remote = _BY_PATH.match(step["device"])
    assert remote is not None, step
    return array, next(s.disk or "" for s in site.sessions if s.target == remote["iqn"])


def _drop_bad_block_log(sites: dict[str, SiteFacts], name: str, step: dict[str, Any]) -> dict[str, SiteFacts]:
    """The agent's `drop_bad_block_log`: the leg back in sync, its log and what it listed gone."""
    site = sites[name]
    array, member = _replica_member(site, step)
    members = tuple(dataclasses.replace(m, bad_blocks=()) if m.device == member else m for m in array.members)
    disks = dict(site.disks)
    disk = disks.get(step["device"])
    if disk is not None and disk.superblock is not None:
        superblock = dataclasses.replace(disk.superblock, bad_block_log=False)
        disks[step["device"]] = dataclasses.replace(disk, superblock=superblock)
    changed = dataclasses.replace(array, members=members)
    return _replace(sites, name, arrays=tuple(changed if a is array else a for a in site.arrays), disks=disks)


def _member_state(sites: dict[str, SiteFacts], name: str, step: dict[str, Any]) -> dict[str, SiteFacts]:
    """The agent's `member_state`: a leg made write-mostly or not, named by its by-path link (a
    replica's, at a create) or its kernel node (`/dev/sdb`, a repair)."""
    site = sites[name]
    array = _array_named(site, step["md"])
    remote = _BY_PATH.match(step["device"])
    member = (
        next(s.disk or "" for s in site.sessions if s.target == remote["iqn"])
        if remote
        else step["device"].removeprefix("/dev/")
    )
    flag = {"write_mostly"}
    members = tuple(
        dataclasses.replace(m, state=m.state | flag if step["value"] == "writemostly" else m.state - flag)
        if m.device == member
        else m
        for m in array.members
    )
    changed = dataclasses.replace(array, members=members)
    return _replace(sites, name, arrays=tuple(changed if a is array else a for a in site.arrays))


def _manage(sites: dict[str, SiteFacts], name: str, argv: list[str]) -> dict[str, SiteFacts]:
    """`mdadm MD --remove failed`, `--fail detached`, `--remove detached` and `mdadm MD --re-add PATH`
    (the bitmap resync taken as done)."""
    site = sites[name]
    md_name = argv[1].removeprefix("/dev/md/")
    (array,) = [a for a in site.arrays if md_name in site.array_links[a.kernel_name]]
    if argv[2:] == ["--remove", "failed"]:
        members = tuple(m for m in array.members if not m.is_faulty)
    elif argv[2:] == ["--fail", "detached"]:
        return sites  # marked faulty: the facts show them once removed, next
    elif argv[2:] == ["--remove", "detached"]:
        present = {d.kernel_name for d in site.disks.values()} | {s.disk for s in site.sessions if s.disk}
        members = tuple(m for m in array.members if m.device in present)
    else:
        remote = _BY_PATH.match(argv[3])
        assert remote is not None, argv
        session = next(s for s in site.sessions if s.target == remote["iqn"] and s.state == "LOGGED_IN")
        assert session.disk not in [m.device for m in array.members], "re-add of a member still in the array"
        slot = next(i for i in range(array.raid_disks) if i not in [m.slot for m in array.members])
        members = (*array.members, MdMember(session.disk or "", slot, frozenset({"in_sync", "write_mostly"})))
    changed = dataclasses.replace(array, members=members)
    return _replace(sites, name, arrays=tuple(changed if a is array else a for a in site.arrays))


def _with_superblock(
    sites: dict[str, SiteFacts], name: str, path: str, uuid_: str, md_name: str
) -> dict[str, SiteFacts]:
    site = sites[name]
    signatures = (Signature("linux_raid_member", 0x1000, uuid_, md_name),)
    superblock = MdSuperblock(uuid_, md_name, "00000000:00000000:00000000:00000000", 1)
    disks = dict(site.disks)
    for leg in _through(site, path):
        disks[leg] = dataclasses.replace(disks[leg], signatures=signatures, superblock=superblock)
    return _replace(sites, name, disks=disks)


def _through(site: SiteFacts, path: str) -> list[str]:
    """`path` and, through a cache, the disk underneath (what is written lands there too, written back)."""
    under = [path]
    device = site.dm.get(path.removeprefix("/dev/mapper/"))
    if device is not None and device.table is not None:
        origin = device.table.devices[-1 if device.table.target == "cache" else 0]
        under += [d.path for d in site.disks.values() if d.devno == origin]
    return under


def _leg_record_create(sites: dict[str, SiteFacts], name: str, step: dict[str, Any]) -> dict[str, SiteFacts]:
    record = first_record(step["mirror"], step["array"], step["site"], 0.0)
    return _write_records(sites, name, step["devices"], lambda _old: record)


def _leg_record_promote(sites: dict[str, SiteFacts], name: str, step: dict[str, Any]) -> dict[str, SiteFacts]:
    def promoted(old: LegRecord | None) -> LegRecord:
        assert old is not None
        assert old.current.n == step["after"]
        return old.then(step["site"], 0.0, step["how"])

    return _write_records(sites, name, step["devices"], promoted)


def _write_records(
    sites: dict[str, SiteFacts],
    name: str,
    devices: list[str],
    new: Callable[[LegRecord | None], LegRecord],
) -> dict[str, SiteFacts]:
    for path in devices:
        where, device = name, path
        if "-iscsi-" in path:  # a replica's leg through its session: the site exporting that target
            iqn = path.split("-iscsi-", 1)[1].rsplit("-lun-", 1)[0]
            where = next(n for n, site in sites.items() if iqn in site.targets)
            device = sites[where].backstores[sites[where].targets[iqn].luns[0]]
        site = sites[where]
        disks = dict(site.disks)
        record = new(disks[device].leg_record)
        for leg in _through(site, device):
            disks[leg] = dataclasses.replace(disks[leg], leg_record=record)
        sites = _replace(sites, where, disks=disks)
    return sites


def _dm_run(sites: dict[str, SiteFacts], name: str, argv: list[str]) -> dict[str, SiteFacts]:
    """`dmsetup create|remove` and the `dd` that zeroes a cache disk's head."""
    site = sites[name]
    disks = dict(site.disks)
    dm = dict(site.dm)
    if argv[0] == "dd":
        path = next(a.removeprefix("of=") for a in argv if a.startswith("of="))
        disks[path] = dataclasses.replace(disks[path], first_sector="zero", signatures=())
    elif argv[1] == "create":
        device, table = argv[2], argv[4]
        by_path = {d.path: d.devno for d in disks.values() if d.devno}
        table = " ".join(by_path.get(word, word) for word in table.split())
        dm[device] = _dm_device(site, device, table)
        parsed = dm[device].table
        assert parsed is not None
        # dm-cache names its origin last; writecache and linear, first.
        origin = disks.get(_path_of(disks, parsed.devices[-1 if parsed.target == "cache" else 0]))
        path = f"/dev/mapper/{device}"
        number = 100 + len(dm)
        disks[path] = DiskFacts(
            path,
            True,
            f"dm-{number}",
            int(table.split()[1]) * 512,
            origin.signatures if origin else (),
            origin.superblock if origin else None,
            devno=f"254:{number}",
            leg_record=origin.leg_record if origin else None,  # a cache shows its disk's content
        )
    else:
        assert argv[1] == "remove", argv
        dm.pop(argv[2], None)
        disks.pop(f"/dev/mapper/{argv[2]}", None)
    return _replace(sites, name, disks=disks, dm=dm)


def _path_of(disks: dict[str, DiskFacts], devno: str) -> str:
    return next((d.path for d in disks.values() if d.devno == devno), "")


def _dm_device(site: SiteFacts, name: str, table: str) -> DmDevice:
    parsed = parse_dm_table(table)
    blocks = 1000
    cache = CacheStatus(blocks, 0, 0) if parsed.target in ("writecache", "cache") else None
    kernel = site.disks.get(f"/dev/mapper/{name}")
    return DmDevice(name, kernel.kernel_name if kernel else "", parsed, cache)


def _dm_reload(sites: dict[str, SiteFacts], name: str, step: dict[str, Any]) -> dict[str, SiteFacts]:
    site = sites[name]
    by_path = {d.path: d.devno for d in site.disks.values() if d.devno}
    text = from_wire(DmTarget, step["table"]).text()  # the text the site writes
    table = " ".join(by_path.get(word, word) for word in text.split())
    return _replace(sites, name, dm={**site.dm, step["name"]: _dm_device(site, step["name"], table)})


def _drain_cache(sites: dict[str, SiteFacts], name: str, step: dict[str, Any]) -> dict[str, SiteFacts]:
    return _dm_reload(sites, name, {"name": step["name"], "table": step["linear"]})


def _cdp_stack(sites: dict[str, SiteFacts], name: str, step: dict[str, Any]) -> dict[str, SiteFacts]:
    """The stack's devices appear; the mirror starts with CDP's index (activation finds it there)."""
    site = sites[name]
    # The simulated mdadm keeps no disk for the array: this is what observe would see of it.
    md = site.disks.get(step["md"], DiskFacts(step["md"], True, "md127", 1 << 30, devno="9:127"))
    assert step["fresh"] or step["allow_data"] or md.first_sector in ("zero", "cdp"), step
    dm, disks = dict(site.dm), dict(site.disks)
    disks[step["md"]] = dataclasses.replace(md, first_sector="cdp", signatures=())
    for number, dm_name in enumerate(stack_names(step["mirror"]).values(), start=200):
        table = parse_dm_table(f"0 1000 linear {md.devno or '9:0'} 0")
        dm[dm_name] = DmDevice(dm_name, f"dm-{number}", table, None)
    volume = f"/dev/mapper/{stack_names(step['mirror'])['volume']}"
    disks[volume] = DiskFacts(volume, True, "dm-206", md.size * 3 // 4, devno="254:206")
    return _replace(sites, name, dm=dm, disks=disks)


def _cdp_deactivate(sites: dict[str, SiteFacts], name: str, step: dict[str, Any]) -> dict[str, SiteFacts]:
    site = sites[name]
    gone = {*stack_names(step["mirror"]).values(), *step["views"]}
    dm = {n: d for n, d in site.dm.items() if n not in gone}
    disks = {p: d for p, d in site.disks.items() if p.removeprefix("/dev/mapper/") not in gone}
    return _replace(sites, name, dm=dm, disks=disks)


def _remote_superblock(
    sites: dict[str, SiteFacts], iqn: str, uuid_: str, md_name: str
) -> dict[str, SiteFacts]:
    for name, site in sites.items():
        target = site.targets.get(iqn)
        if target is not None:
            return _with_superblock(sites, name, site.backstores[target.luns[0]], uuid_, md_name)
    raise AssertionError(f"no site exports {iqn}")


def _wireguard_key(sites: dict[str, SiteFacts], name: str, step: dict[str, Any]) -> dict[str, SiteFacts]:
    """`wg genkey` into the key file: the site now shows its public key."""
    wireguard = sites[name].wireguard
    assert wireguard is not None, f"site {name} has no wg(8)"
    # A key's shape (44 characters of base64), so that each site's own check takes it.
    keys = {**wireguard.keys, Path(step["path"]).stem: f"publickeyof{name}".ljust(43, "A") + "="}
    return _replace(sites, name, wireguard=dataclasses.replace(wireguard, keys=keys))


def _wireguard_tunnel(sites: dict[str, SiteFacts], name: str, step: dict[str, Any]) -> dict[str, SiteFacts]:
    """The interface as `ip` and `wg` leave it, as `wg show dump` then shows it."""
    wireguard = sites[name].wireguard
    assert wireguard is not None, f"site {name} has no wg(8)"
    peers = {
        p["public_key"]: WireguardPeer(
            p["public_key"],
            p["endpoint"],
            (f"{p['address']}/32",),
            0,
            step["keepalive"] if p["endpoint"] else None,
        )
        for p in step["peers"]
    }
    interface = WireguardInterface(
        wireguard.keys[step["interface"]], step["port"], peers, (step["address"],), True
    )
    interfaces = {**wireguard.interfaces, step["interface"]: interface}
    return _replace(sites, name, wireguard=dataclasses.replace(wireguard, interfaces=interfaces))


_STEPS = {
    "wireguard_key": _wireguard_key,
    "wireguard_tunnel": _wireguard_tunnel,
    "run": _iscsiadm,  # mdadm is handled by Sites.run: it needs the disks' memory
    **{cls.kind: _lio for cls in LIO_STEPS},
    "mdadm_conf": _mdadm_conf,
    "md_attribute": _md_attribute,
    "session_timeout": _session_timeout,
    "member_state": _member_state,
    "disk_sysfs": _disk_sysfs,
    "wait_path": _nothing,
    "node_secrets": _node_secrets,
    "dm_reload": _dm_reload,
    "drain_cache": _drain_cache,
    "cdp_stack": _cdp_stack,
    "cdp_deactivate": _cdp_deactivate,
    "leg_record_create": _leg_record_create,
    "leg_record_promote": _leg_record_promote,
    "leg_record_join": _nothing,  # the records' I/O is the agent's (tests/unit/test_failover.py)
    "drop_bad_block_log": _drop_bad_block_log,
}
