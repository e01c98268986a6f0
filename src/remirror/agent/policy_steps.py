"""The steps of remirror's agent protocol, and what each may ask (remirror.agent.policy).

A step is checked field by field against the site's scope through the
Checker's vocabulary (devices, mirrors, targets, dm names); a `run` step is
one of a few command forms, never a program of the sender's choosing.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from remirror.agent import policy
from remirror.agent.policy import NAME, UUID, Checker, Refused
from remirror.agent.policy_lio import ONE_LINE, lio
from remirror.facts import parsers  # its MDADM_CONF read at each check: tests point it elsewhere
from remirror.facts.cdp import is_leg_points
from remirror.facts.generations import SAVE_NAME
from remirror.facts.wireguard import INTERFACE_PREFIX, KEY_DIR

_MD_SYSFS = re.compile(
    r"/sys/block/(md\d+)/md/(suspend_hi|sync_action|sync_max|bitmap/backlog|sync_speed_min|sync_speed_max"
    r"|dev-([A-Za-z0-9!_-]+)/state)"
)
_SESSION_SYSFS = re.compile(r"/sys/class/iscsi_session/(session\d+)/recovery_tmo")


def run(check: Checker, step: dict[str, Any]) -> None:
    argv = step.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise Refused("a run step's argv is a list of strings")
    check_argv(check, argv)


def write_file(check: Checker, step: dict[str, Any]) -> None:
    conf = parsers.MDADM_CONF
    if step.get("path") != conf:
        raise Refused(f"write_file {step.get('path')!r}: remirror's agent writes only {conf}")
    if int(step.get("mode", 0o644)) & 0o7022:
        raise Refused(f"write_file {conf}: mode {int(step['mode']):o} is writable by others")
    changed = policy.lines_of(conf) ^ set(str(step.get("content", "")).splitlines())
    other = sorted(line for line in changed if line.strip() and not line.startswith(("ARRAY ", "#")))
    if other:
        raise Refused(f"write_file {conf}: only its ARRAY lines may change, not {other[0]!r}")


def write_sysfs(check: Checker, step: dict[str, Any]) -> None:
    path = str(step.get("path"))
    md, session = _MD_SYSFS.fullmatch(path), _SESSION_SYSFS.fullmatch(path)
    if md:
        check.device(f"/dev/{md.group(1)}")
    elif session:
        target = Path(f"/sys/class/iscsi_session/{session.group(1)}/targetname")
        check.iqn(target.read_text().strip() if target.exists() else "")
    else:
        raise Refused(f"write_sysfs {path!r}: not an md or iSCSI session attribute remirror sets")


# The only keys a node_secrets step writes: the CHAP passwords iscsiadm's argv would show in `ps`.
NODE_SECRET_KEYS = frozenset({"node.session.auth.password", "node.session.auth.password_in"})


def node_secrets(check: Checker, step: dict[str, Any]) -> None:
    """CHAP secrets into a node record: the record's path is made at the site from a target, an
    address and a port that are each checked whole (an IP address or host name, a port number)
    and name a portal of the site's scope, so no `..` or `/` of the sender's reaches it; only the
    CHAP password keys, each value one line (a newline would add a setting of the sender's)."""
    check.iqn(step.get("target"))
    address, port = step.get("address"), step.get("port")
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
        raise Refused(f"node_secrets: port {port!r} is not a port number")
    if not isinstance(address, str) or not _is_host(address):
        raise Refused(f"node_secrets: {address!r} is not an IP address or host name")
    if check.scope is not None and (address, port) not in check.scope.portals:
        raise Refused(f"node_secrets: portal {address}:{port} is not one {check._sources()} name")
    values = step.get("values")
    if not isinstance(values, dict) or not values:
        raise Refused("node_secrets: its values are CHAP settings by name")
    for key, value in values.items():
        if key not in NODE_SECRET_KEYS:
            raise Refused(f"node_secrets: {key!r} is not a CHAP password setting")
        if not isinstance(value, str) or not ONE_LINE.fullmatch(value):
            raise Refused(f"node_secrets: the value of {key} is not one line of text")


_NODE_KEY = re.compile(r"node\.[A-Za-z0-9_.\[\]]{1,120}")  # node.conn[0].timeo.noop_out_interval
_NODE_VALUE = re.compile(r"[ -~]{0,256}")
_HOST_NAME = re.compile(
    r"(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
)


def _is_host(text: str) -> bool:
    """An IP address or a host name, as a whole: nothing a path could be made of (no `/`, no `..`)."""
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return _HOST_NAME.fullmatch(text) is not None
    return True


def save_ranges(check: Checker, step: dict[str, Any]) -> None:
    """A discarded leg's writes kept aside: only ever into /var/lib/remirror/saved/NAME, the path
    made at the site from a name (remirror.agent.generations), never a directory of the sender's."""
    check.device(step.get("leg"))
    check.mirror(step.get("mirror"))
    check.name(step.get("site"), "site")
    if check.scope is not None and step.get("site") not in check.scope.sites:
        raise Refused(f"save_ranges: site {step.get('site')!r} is not one of this site's own names")
    if not isinstance(step.get("save"), str) or not SAVE_NAME.fullmatch(step["save"]):
        raise Refused(f"save_ranges {step.get('save')!r}: a name under /var/lib/remirror/saved, not a path")


def wireguard(check: Checker, step: dict[str, Any]) -> None:
    interface = str(step.get("interface", Path(str(step.get("path"))).stem))
    key = step.get("key_file", step.get("path"))
    if check.scope is not None and interface not in check.scope.interfaces:
        raise Refused(f"WireGuard interface {interface!r} is not one this site's profiles name")
    if not interface.startswith(INTERFACE_PREFIX) or key != f"{KEY_DIR}/{interface}.key":
        raise Refused(f"WireGuard {interface!r} with key {key!r}: not remirror's")


_PUBLIC_KEY = re.compile(r"[A-Za-z0-9+/]{43}=")


def wireguard_tunnel(check: Checker, step: dict[str, Any]) -> None:
    """This site's end of a tunnel, exactly as its own profiles make it: its address and prefix,
    port, keepalive, and its peers' tunnel addresses and endpoints (an address of `X/0` would
    route the host's traffic into the tunnel). Only the peers' public keys come from elsewhere
    (each site makes its own key): each must be one."""
    wireguard(check, step)
    peers = step.get("peers")
    if not isinstance(peers, list) or not all(isinstance(p, dict) for p in peers):
        raise Refused("wireguard_tunnel: its peers are a list")
    for peer in peers:
        if not isinstance(peer.get("public_key"), str) or not _PUBLIC_KEY.fullmatch(peer["public_key"]):
            raise Refused(f"wireguard_tunnel: {peer.get('public_key')!r} is not a WireGuard public key")
    found = (
        step.get("address"),
        step.get("port"),
        step.get("keepalive"),
        frozenset((str(p.get("address")), p.get("endpoint")) for p in peers),
    )
    if check.scope is not None:
        if found not in check.scope.tunnels.get(str(step.get("interface")), frozenset()) or len(peers) != len(
            found[3]
        ):
            raise Refused(
                f"wireguard_tunnel {step.get('interface')}: not the tunnel {check._sources()} make here"
                f" ({step.get('address')}, port {step.get('port')}, peers {sorted(map(str, found[3]))})"
            )
        return
    # A site without profiles: remirror's shapes only (a link-local /24, peers' /32s in it).
    try:
        network = ipaddress.ip_interface(str(step.get("address"))).network
        inside = all(ipaddress.ip_address(str(p.get("address"))) in network for p in peers)
    except ValueError:
        network, inside = None, False
    if network is None or network.prefixlen != 24 or not network.is_link_local or not inside:
        raise Refused(
            f"wireguard_tunnel: {step.get('address')!r} and its peers are not a tunnel remirror makes"
        )


def prove_blank(check: Checker, step: dict[str, Any]) -> None:
    check.readable(step.get("device"))  # it only reads


def points_stack(check: Checker, step: dict[str, Any]) -> None:
    """`cdp_stack`: a mirror's CDP (on its array), or a leg's own points, exactly as named. A
    leg's own points are built on a blank disk or activated as their index says, never laid
    over data or fresh at another site's word: that is its operator's (`remirror cdp`)."""
    key, disk = step.get("mirror"), step.get("md")
    laid = step.get("fresh") is not False or step.get("allow_data") is not False
    if isinstance(key, str) and is_leg_points(key) and laid:  # with or without profiles here
        raise Refused(f"the points of {key} are laid over data only by this site's operator (apply here)")
    if check.scope is not None and any(key == k for k, _ in check.scope.points):
        if (key, disk) not in check.scope.points:
            raise Refused(f"the points of {key} are on another disk than {disk!r}")
        return
    check.mirror(key)
    check.device(disk)


def points_down(check: Checker, step: dict[str, Any]) -> None:
    """`cdp_deactivate`: a mirror's CDP stack, and its views. Never a leg's own points: only the
    site that keeps them takes them down (`remirror cdp down --leg`, its operator's)."""
    key = step.get("mirror")
    if isinstance(key, str) and is_leg_points(key):  # with or without profiles here
        raise Refused(f"the points of {key} are taken down only by this site's operator (cdp down --leg)")
    check.mirror(key)
    views = step.get("views", [])
    check.each(lambda view: check.name(view, "view"), views)
    ours = (f"remirror-{key}-cdp-at-", f"remirror-{key}-cdp-drill")  # a point's view, a drill's copy
    if not all(str(view).startswith(ours) and check.ours(str(view), points=True) for view in views):
        raise Refused(f"views {views!r} are not those of {key}'s points")


def check_argv(check: Checker, argv: list[str]) -> None:
    """Refused unless `argv` is one of the forms below, naming only what the site's scope allows."""
    forms = {"mdadm": _mdadm, "iscsiadm": _iscsiadm, "dmsetup": _dmsetup, "dd": _dd}
    if argv[0] not in forms:
        raise Refused(f"{argv[0]!r}: remirror's agent runs only mdadm, iscsiadm, dmsetup and dd")
    forms[argv[0]](check, argv[1:])


def _mdadm(check: Checker, args: list[str]) -> None:
    values = {
        "--metadata": r"1\.[02]",
        "--level": "1",
        "--raid-devices": r"\d{1,2}",
        "--uuid": UUID.pattern,
        "--name": NAME.pattern,
        "--homehost": "<none>",
        "--bitmap": "none|internal",
        "--bitmap-chunk": r"\d+K",
        "--size": r"\d+M",
        "--write-behind": r"\d+",
    }
    flags = {"--stop", "--grow", "--add", "--re-add", "--fail", "--remove", "--zero-superblock"}
    flags |= {"--readwrite", "--create", "--run", "--assume-clean"}
    for arg in args:
        option, equals, value = arg.partition("=")
        if equals and option in values and re.fullmatch(values[option], value):
            if option == "--name":
                check.mirror(value)
            continue
        if arg in flags or arg in ("detached", "failed", "missing"):
            continue
        if arg.startswith("-"):
            raise Refused(f"mdadm {arg}: not an option remirror uses")
        check.device(arg)


def _iscsiadm(check: Checker, args: list[str]) -> None:
    if args[:3] != ["-m", "node", "-T"] or len(args) < 7 or args[4] != "-p":
        raise Refused("iscsiadm: only `-m node -T IQN -p PORTAL` with one operation")
    check.iqn(args[3])
    check.portal(args[5])
    rest = args[6:]
    if rest in (["--login"], ["--logout"], ["-o", "new"], ["-o", "delete"]):
        return
    pairs = rest[2:]
    if rest[:2] != ["-o", "update"] or not pairs or len(pairs) % 4:
        raise Refused(f"iscsiadm {' '.join(rest[:2])}: not an operation remirror uses")
    for i in range(0, len(pairs), 4):
        n, key, v, value = pairs[i : i + 4]
        if n != "-n" or v != "-v" or not _NODE_KEY.fullmatch(key) or "password" in key:
            raise Refused(f"iscsiadm -o update {key[:80]!r}: not a node setting remirror makes")
        if not _NODE_VALUE.fullmatch(value):
            raise Refused(f"iscsiadm -o update {key}: the value is not one line of printable text")


def _dmsetup(check: Checker, args: list[str]) -> None:
    if len(args) == 2 and args[0] == "remove":
        return check.dm_name(args[1])
    if len(args) == 4 and args[0] == "create" and args[2] == "--table":
        check.dm_name(args[1])
        return check.table(args[3])
    raise Refused(f"dmsetup {' '.join(args[:1])}: only `remove NAME` and `create NAME --table TABLE`")


def _dd(check: Checker, args: list[str]) -> None:
    # A cache's first block zeroed (remirror.plan.cache), so no old superblock is taken up.
    shape = ["if=/dev/zero", "of=*", "bs=4096", "count=1", "oflag=direct", "status=none"]
    if len(args) != len(shape) or any(a != s for a, s in zip(args, shape, strict=True) if s != "of=*"):
        raise Refused("dd: only the zeroing of a cache's first 4KiB")
    check.device(args[1].removeprefix("of="))


def _fields(**checks: str) -> Callable[[Checker, dict[str, Any]], None]:
    """A step whose named fields are devices, lists of them, mirrors, dm names and so on."""

    def fields(check: Checker, step: dict[str, Any]) -> None:
        for key, what in checks.items():
            _FIELD_CHECKS[what](check, step.get(key))

    return fields


def _refuse_path(value: Any) -> None:
    raise Refused(f"{value!r}: waits only for device paths")


def _uuid(value: Any) -> None:
    if not isinstance(value, str) or not UUID.fullmatch(value):
        raise Refused(f"{value!r} is not an md array UUID")


_FIELD_CHECKS: dict[str, Callable[[Checker, Any], None]] = {
    "device": Checker.device,
    "devices": lambda check, value: check.each(check.device, value),
    "mirror": Checker.mirror,
    "dm": Checker.dm_name,
    "table": lambda check, value: check.table(value or ""),
    "iqn": Checker.iqn,
    "path": lambda check, value: (
        check.device(value) if str(value).startswith("/dev/") else _refuse_path(value)
    ),
    "uuid": lambda check, value: _uuid(value),
}

_MEMBER_STATES = {"writemostly", "-writemostly"}


def _member_state(check: Checker, step: dict[str, Any]) -> None:
    _fields(md="device", device="device")(check, step)
    if step.get("value") not in _MEMBER_STATES:
        raise Refused(f"member state {step.get('value')!r}: remirror sets only write-mostly")


def _disk_sysfs(check: Checker, step: dict[str, Any]) -> None:
    check.device(step.get("device"))
    if step.get("attribute") not in ("queue/scheduler", "md/sync_speed_min", "md/sync_speed_max"):
        raise Refused(f"block device attribute {step.get('attribute')!r}: not one remirror sets")


STEP_CHECKS: dict[str, Callable[[Checker, dict[str, Any]], None]] = {
    "run": run,
    "prove_blank": prove_blank,
    "wait_path": _fields(path="path"),
    "assemble_array": _fields(md="device", uuid="uuid", devices="devices"),
    "node_secrets": node_secrets,
    "write_file": write_file,
    "write_sysfs": write_sysfs,
    "member_state": _member_state,
    "disk_sysfs": _disk_sysfs,
    "local_leg_last": _fields(md="device", device="device"),
    "add_replica_legs": _fields(md="device", devices="devices"),
    "drop_bad_block_log": _fields(md="device", device="device"),
    "lio": lio,  # remirror.agent.policy_lio
    "dm_reload": _fields(name="dm", table="table"),
    "drain_cache": _fields(name="dm", cleaner_table="table", linear="table"),
    "cdp_stack": points_stack,
    "cdp_deactivate": points_down,
    "leg_record_create": _fields(mirror="mirror", devices="devices"),
    "leg_record_promote": _fields(devices="devices"),
    "leg_record_join": _fields(source="device", device="device"),
    "save_ranges": save_ranges,
    "wireguard_key": wireguard,
    "wireguard_tunnel": wireguard_tunnel,
}
