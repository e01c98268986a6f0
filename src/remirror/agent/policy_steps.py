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
from remirror.agent.policy_iscsi import iscsiadm, node_secrets
from remirror.agent.policy_lio import lio
from remirror.facts import parsers  # its MDADM_CONF read at each check: tests point it elsewhere
from remirror.facts.cdp import is_leg_points
from remirror.facts.generations import HOW, SAVE_NAME
from remirror.facts.wireguard import INTERFACE_PREFIX, KEY_DIR

# What the planner writes to sysfs, each attribute with the values it writes there: a resync's
# limits (KiB/s), a leg's write-mostly flag, write-behind's count (at most md's 16383), a
# session's recovery time-out (seconds), and its repairs of a move or an add cut short: writes
# resumed (suspend_hi 0: never a suspension), resyncs released (sync_max max: never held), a
# check stopped (sync_action idle: never a resync started). Nothing else.
_MD_SYSFS = re.compile(
    r"/sys/block/(md\d+)/md/(sync_speed_min|sync_speed_max|suspend_hi|sync_max|sync_action"
    r"|bitmap/backlog|dev-([A-Za-z0-9!_-]+)/state)"
)
_SESSION_SYSFS = re.compile(r"/sys/class/iscsi_session/(session\d+)/recovery_tmo")
_NUMBER = re.compile(r"\d{1,12}")
_SYSFS_VALUES = {
    "sync_speed_min": _NUMBER,
    "sync_speed_max": _NUMBER,
    "suspend_hi": re.compile("0"),
    "sync_action": re.compile("idle"),
    "sync_max": re.compile("max"),
    "backlog": re.compile(r"\d{1,4}|1[0-5]\d{3}|16[0-2]\d\d|163[0-7]\d|1638[0-3]"),
    "state": re.compile("-?writemostly"),
}


def run(check: Checker, step: dict[str, Any]) -> None:
    argv = step.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise Refused("a run step's argv is a list of strings")
    codes = step.get("ok_codes", [0])
    if not isinstance(codes, list) or not all(type(code) is int and 0 <= code <= 255 for code in codes):
        raise Refused("a run step's ok_codes are exit codes (0 to 255)")
    _seconds(step.get("timeout", 120))
    check_argv(check, argv)


MAX_STEP_TIMEOUT = 86400  # a command of remirror's that runs longer is hung


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
    path, value = str(step.get("path")), step.get("value")
    md, session = _MD_SYSFS.fullmatch(path), _SESSION_SYSFS.fullmatch(path)
    shape = _SYSFS_VALUES[path.rsplit("/", 1)[-1]] if md else _NUMBER
    if (md or session) and not (isinstance(value, str) and shape.fullmatch(value)):
        raise Refused(f"write_sysfs {path}: {str(value)[:40]!r} is not a value remirror writes there")
    if md:
        check.device(f"/dev/{md.group(1)}")
    elif session:
        iqn = session_target(session.group(1))
        check.iqn(iqn)
        if check.scope is not None:
            # The node record's replacement time-out, live: the one the site's profiles make for
            # that target (a day's would hang the leg's I/O where the profile says degrade). The
            # profile layer is loaded already: the scope was made from it.
            from remirror.profile.timeouts import REPLACEMENT_TIMEOUT

            if (REPLACEMENT_TIMEOUT, value) not in check.scope.node_settings.get(iqn, frozenset()):
                raise Refused(f"write_sysfs {path}: {value} s is not {iqn}'s replacement time-out here")
    else:
        raise Refused(f"write_sysfs {path!r}: not an md or iSCSI session attribute remirror sets")


def session_target(session: str) -> str:
    """The target iSCSI session `session` (`session7`) is logged in to; "" if there is none."""
    target = Path(f"/sys/class/iscsi_session/{session}/targetname")
    return target.read_text().strip() if target.exists() else ""


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
    for field, limit in (("chunk", 1 << 30), ("history", 100)):
        number = step.get(field)
        if not isinstance(number, int) or isinstance(number, bool) or not 1 <= number <= limit:
            raise Refused(f"cdp_stack: {field} {str(number)[:40]!r} is not a number from 1 to {limit}")
    if not all(isinstance(step.get(flag), bool) for flag in ("fresh", "allow_data")):
        raise Refused("cdp_stack: fresh and allow_data are true or false")
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
    forms = {"mdadm": _mdadm, "iscsiadm": iscsiadm, "dmsetup": _dmsetup, "dd": _dd}
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


def _shaped(value: Any, shape: re.Pattern[str], what: str) -> None:
    if not isinstance(value, str) or not shape.fullmatch(value):
        raise Refused(f"{str(value)[:40]!r} is not {what}")


def _count(value: Any, absent_ok: bool = False) -> None:
    if value is None and absent_ok:
        return
    if type(value) is not int or not 0 <= value < 1 << 62:
        raise Refused(f"{str(value)[:40]!r} is not a count")


def _site_name(check: Checker, value: Any) -> None:
    """A site a leg record names primary: one the site's profiles name (the generation decides who
    may run the mirror: a name of no site would leave the DR site's own promotion nobody to trust)."""
    _shaped(value, NAME, "a site's name")
    if check.scope is not None and value not in check.scope.known_sites:
        raise Refused(f"site {value!r} is not one {check._sources()} name")


def _flag(value: Any) -> None:
    if value is not None and not isinstance(value, bool):
        raise Refused(f"{str(value)[:40]!r} is not true or false")


def _one_of(value: Any, allowed: tuple[Any, ...], what: str) -> None:
    if value not in allowed:
        raise Refused(f"{str(value)[:40]!r} is not {what} ({', '.join(allowed)})")


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
    "seconds": lambda check, value: _seconds(value, absent_ok=True),
    "site_name": lambda check, value: _site_name(check, value),
    "count": lambda check, value: _count(value),
    "count_or_none": lambda check, value: _count(value, absent_ok=True),
    "how": lambda check, value: _one_of(value, HOW, "how a generation begins"),
    "flag": lambda check, value: _flag(value),
    "cache_kind": lambda check, value: _one_of(value, ("writecache", "cache"), "a cache's target"),
}


def _seconds(value: Any, absent_ok: bool = False) -> None:
    """A time-out; `absent_ok`: left out (None), the handler's own default."""
    if value is None and absent_ok:
        return
    if type(value) not in (int, float) or not 0 < value <= MAX_STEP_TIMEOUT:
        raise Refused(f"{str(value)[:40]!r} is not a number of seconds up to {MAX_STEP_TIMEOUT}")


_MEMBER_STATES = {"writemostly", "-writemostly"}


def _member_state(check: Checker, step: dict[str, Any]) -> None:
    _fields(md="device", device="device")(check, step)
    if step.get("value") not in _MEMBER_STATES:
        raise Refused(f"member state {step.get('value')!r}: remirror sets only write-mostly")


_DISK_SYSFS_VALUES = {
    "queue/scheduler": re.compile("none"),
    "md/sync_speed_min": _NUMBER,
    "md/sync_speed_max": _NUMBER,
}


def _disk_sysfs(check: Checker, step: dict[str, Any]) -> None:
    check.device(step.get("device"))
    shape = _DISK_SYSFS_VALUES.get(str(step.get("attribute")))
    if shape is None:
        raise Refused(f"block device attribute {step.get('attribute')!r}: not one remirror sets")
    value = step.get("value")
    if not isinstance(value, str) or not shape.fullmatch(value):
        raise Refused(
            f"block device attribute {step['attribute']}: {str(value)[:40]!r} is not a value it takes"
        )


STEP_CHECKS: dict[str, Callable[[Checker, dict[str, Any]], None]] = {
    "run": run,
    "prove_blank": prove_blank,
    "wait_path": _fields(path="path", timeout="seconds"),
    "assemble_array": _fields(md="device", uuid="uuid", devices="devices"),
    "node_secrets": node_secrets,  # remirror.agent.policy_iscsi
    "write_file": write_file,
    "write_sysfs": write_sysfs,
    "member_state": _member_state,
    "disk_sysfs": _disk_sysfs,
    "local_leg_last": _fields(md="device", device="device"),
    "add_replica_legs": _fields(md="device", devices="devices"),
    "drop_bad_block_log": _fields(md="device", device="device"),
    "lio": lio,  # remirror.agent.policy_lio
    "dm_reload": _fields(name="dm", table="table"),
    "drain_cache": _fields(
        name="dm", cleaner_table="table", linear="table", target="cache_kind", timeout="seconds"
    ),
    "cdp_stack": points_stack,
    "cdp_deactivate": points_down,
    "leg_record_create": _fields(
        mirror="mirror", array="uuid", site="site_name", devices="devices", check_room="flag"
    ),
    "leg_record_promote": _fields(
        devices="devices", array="uuid", site="site_name", after="count", how="how", n="count_or_none"
    ),
    "leg_record_join": _fields(source="device", device="device"),
    "save_ranges": save_ranges,
    "wireguard_key": wireguard,
    "wireguard_tunnel": wireguard_tunnel,
}
