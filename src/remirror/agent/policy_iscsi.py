"""The DR site's wall around its iSCSI initiator (remirror.agent.policy): the node records of
the targets its profiles log in to, each setting exactly as its profiles make it for that
target (SiteScope.node_settings; CHAP user names its profiles give that target), and the CHAP
passwords written into the record from checked fields, never a path of the sender's.
"""

from __future__ import annotations

import ipaddress
import re
from typing import TYPE_CHECKING

from remirror.agent.policy import Checker, Refused
from remirror.agent.policy_lio import ONE_LINE

if TYPE_CHECKING:
    from remirror.protocol.commands import IscsiNode, IscsiNodeUpdate
    from remirror.protocol.steps import NodeSecrets

# The only keys a node_secrets step writes: the CHAP passwords iscsiadm's argv would show in `ps`.
NODE_SECRET_KEYS = frozenset({"node.session.auth.password", "node.session.auth.password_in"})


def node_secrets(check: Checker, step: NodeSecrets) -> None:
    """CHAP secrets into a node record: the record's path is made at the site from a target, an
    address and a port that are each checked whole (an IP address or host name, a port number)
    and name a portal of the site's scope, so no `..` or `/` of the sender's reaches it; only the
    CHAP password keys, each value one line (a newline would add a setting of the sender's)."""
    _record(check, step.target, step.address, step.port, "node_secrets")
    values = step.values
    if not values:
        raise Refused("node_secrets: its values are CHAP settings by name")
    for key, value in values.items():
        if key not in NODE_SECRET_KEYS:
            raise Refused(f"node_secrets: {key!r} is not a CHAP password setting")
        if not isinstance(value, str) or not ONE_LINE.fullmatch(value):
            raise Refused(f"node_secrets: the value of {key} is not one line of text")


_NODE_KEY = re.compile(r"node\.[A-Za-z0-9_.\[\]]{1,120}")  # node.conn[0].timeo.noop_out_interval
# A node setting's value: one printable line (a profile's custom timeouts are numbers or words),
# a CHAP user name the profile's, and `node.startup` only `manual` (boot logs in to no remote leg).
_NODE_VALUE = re.compile(r"[ -~]{1,255}")  # one printable line: iscsiadm takes it as one argument
_NODE_USERS = {"node.session.auth.username": 0, "node.session.auth.username_in": 1}  # ChapNames' index
_NODE_VALUES = {
    "node.startup": re.compile("manual"),
    "node.session.auth.username": re.compile(r"[!-~]{1,255}"),
    "node.session.auth.username_in": re.compile(r"[!-~]{1,255}"),
}
_HOST_NAME = re.compile(
    r"(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
)


def _is_host(text: str) -> bool:
    """An IP address or a host name, as a whole: nothing a path could be made of (no `/`, no `..`),
    and no IPv6 zone (`fe80::1%...`: any text after the `%`)."""
    if "%" in text:
        return False
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return _HOST_NAME.fullmatch(text) is not None
    return True


def _record(check: Checker, target: str, address: str, port: int, what: str) -> None:
    """A node record of a target of the scope, at a portal of the scope, each field whole."""
    check.iqn(target)
    if not 1 <= port <= 65535:
        raise Refused(f"{what}: port {port!r} is not a port number")
    if not _is_host(address):
        raise Refused(f"{what}: {address[:60]!r} is not an IP address or host name")
    if check.scope is not None and (address, port) not in check.scope.node_portals.get(target, frozenset()):
        # Not another target's portal either: a record of this target at another's address.
        raise Refused(f"{what}: portal {address}:{port} is not one {check._sources()} name for {target}")


def node_command(check: Checker, step: IscsiNode) -> None:
    """`iscsiadm -m node` making, deleting, logging in to or out of a record of the scope's."""
    _record(check, step.target, step.address, step.port, f"iscsi_node {step.op}")


def node_update(check: Checker, step: IscsiNodeUpdate) -> None:
    """Node settings, each as the site's profiles make it for that target: not another portal's
    address, CHAP off, a timeout that hangs its I/O, a discovery setting; its CHAP user names the
    profiles'; never a password (NodeSecrets writes those, out of `ps`)."""
    _record(check, step.target, step.address, step.port, "iscsi_node_update")
    if not step.settings:
        raise Refused("iscsi_node_update: no setting")
    for key, value in step.settings.items():
        if not _NODE_KEY.fullmatch(key) or "password" in key:
            raise Refused(f"iscsi_node_update {key[:80]!r}: not a node setting remirror makes")
        if not _NODE_VALUES.get(key, _NODE_VALUE).fullmatch(value):
            raise Refused(f"iscsi_node_update {key}: {value[:40]!r} is not a value remirror sets")
        if check.scope is None:
            continue
        if key in _NODE_USERS:
            # The CHAP user names the site's profiles give that target, and none other.
            names = {n[_NODE_USERS[key]] for n in check.scope.logins.get(step.target, frozenset()) if n}
            if value not in names:
                raise Refused(f"iscsi_node_update {key}: {value[:40]!r} is not {step.target}'s CHAP user")
        elif (key, value) not in check.scope.node_settings.get(step.target, frozenset()):
            raise Refused(
                f"iscsi_node_update {key}={value[:40]}: not a setting {check._sources()}"
                f" make for {step.target}"
            )
