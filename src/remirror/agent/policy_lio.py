"""The DR site's wall around LIO (remirror.agent.policy): a target only as the site's own
profiles make it. Another site's controller asks for targets, portals, LUNs and ACLs; the site
checks each against `SiteScope.targets`, so that nothing it asks for widens what the site
serves: CHAP never dropped or for another user, a WireGuard mirror's target never on the plain
network, LUN 0 on its own backstore, ACLs for the initiators the profiles name (the primary's,
which no profile names, by its shape), and a parameter's name never a path (docs/security.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from remirror.agent.observe_lio import LIO_SAVE_PATHS
from remirror.agent.policy import IQN, Checker, Refused

if TYPE_CHECKING:
    from remirror.profile.scope import TargetScope  # the agent imports no profile model to start
    from remirror.protocol.steps import Lio

ONE_LINE = re.compile(r"[ -~]{1,256}")  # printable ASCII: no line break of any kind
# The fields each operation reads (remirror.agent.steps._lio): no other is taken.
_OP_FIELDS = {
    "save": frozenset({"path"}),
    "create_backstore": frozenset({"name", "dev"}),
    "delete_backstore": frozenset({"name"}),
    "delete_target": frozenset({"iqn"}),
    "create_target": frozenset({"iqn", "chap", "parameters"}),
    "set_parameters": frozenset({"iqn", "parameters"}),
    "create_portal": frozenset({"iqn", "address", "port"}),
    "create_lun": frozenset({"iqn", "backstore", "lun"}),
    "set_acl": frozenset({"iqn", "initiator", "lun", "chap"}),
}
# Those it must have (the others: `parameters` none, an ACL's `chap` none).
_OP_REQUIRED = {
    "create_target": frozenset({"iqn", "chap"}),
    "set_parameters": frozenset({"iqn"}),
    "set_acl": frozenset({"iqn", "initiator", "lun"}),
}


def lio(check: Checker, request: Lio) -> None:
    """An LIO operation: its fields (a JSON object of the operation's own) checked here, each
    where the operation reads it (remirror.agent.steps._lio), none left to rtslib's reading."""
    op, step = request.op, request.fields
    known = _OP_FIELDS.get(op)
    if known is not None and set(step) - known:
        raise Refused(f"lio {op}: {', '.join(sorted(set(step) - known))[:80]} is not a field of it")
    missing = sorted(_OP_REQUIRED.get(op, known or frozenset()) - set(step))
    if missing:  # the handler reads each: none is left to a default the check did not see
        raise Refused(f"lio {op}: its {', '.join(missing)} is missing")
    for key in ("port", "lun"):  # numbers the handler hands rtslib as numbers
        if key in step and type(step[key]) is not int:
            raise Refused(f"lio {op}: {key} {str(step[key])[:40]!r} is not a whole number")
    if op == "create_target" and not isinstance(step.get("chap"), bool):
        raise Refused("lio create_target: chap is true or false")
    if op == "save":
        if step.get("path") not in LIO_SAVE_PATHS:
            raise Refused(f"lio save {step.get('path')!r}: not where LIO's configuration is restored from")
        return
    if op in ("create_backstore", "delete_backstore"):
        check.backstore(step.get("name"))
        if op == "create_backstore":
            check.device(step.get("dev"))
            served = check.scope.backstores.get(str(step.get("name")), frozenset()) if check.scope else None
            if served is not None and step.get("dev") not in served:  # a name no target serves: none
                devices = " or ".join(sorted(served)) or "no device (no target of the profiles serves it)"
                raise Refused(f"lio: backstore {step.get('name')} serves {devices} here, no other")
        return
    ops = {"delete_target", "create_target", "set_parameters", "create_portal", "create_lun", "set_acl"}
    if op not in ops:
        raise Refused(f"lio {op!r}: not an LIO operation of remirror's agent protocol")
    check.iqn(step.get("iqn"))
    if op in ("create_target", "set_parameters"):
        _target_parameters(step.get("parameters", {}))
    if op == "create_portal":
        check.portal(f"{step.get('address')}:{step.get('port')}")
    elif op == "create_lun":
        check.backstore(step.get("backstore"))
    elif op == "set_acl" and not IQN.fullmatch(str(step.get("initiator"))):
        raise Refused(f"lio set_acl: {step.get('initiator')!r} is not an initiator name")
    if check.scope is not None and op != "delete_target":
        _as_the_site_makes_it(check, op, step)


def _as_the_site_makes_it(check: Checker, op: str, step: Mapping[str, Any]) -> None:
    """A target exactly as the site's own profiles make it: its CHAP (never dropped, never
    another user's, mutual as they say), its portal (a WireGuard mirror's on its tunnel only),
    its LUN 0 on its backstore, ACLs for the initiators they name (docs/security.md)."""
    iqn = str(step.get("iqn"))
    target = check.scope.targets.get(iqn) if check.scope else None
    if target is None:
        raise Refused(f"lio {op}: {iqn} is not a target {check._sources()} make on this site")
    if op == "create_target" and step.get("chap") not in {names is not None for names in target.chap}:
        said = "with" if step.get("chap") else "without"
        raise Refused(f"lio create_target: {iqn} {said} CHAP is not as {check._sources()} make it")
    if op == "create_portal" and (step.get("address"), step.get("port")) not in target.portals:
        raise Refused(f"lio create_portal: {iqn} listens only on {_portals(target)}")
    if op == "create_lun" and (step.get("lun") != 0 or step.get("backstore") not in target.backstores):
        raise Refused(f"lio create_lun: {iqn}'s LUN 0 serves {' or '.join(sorted(target.backstores))}")
    if op == "set_acl":
        _acl(iqn, target, step)


_CHAP_KEYS = frozenset({"username", "password", "mutual_username", "mutual_password"})


def _acl(iqn: str, target: TargetScope, step: Mapping[str, Any]) -> None:
    initiator = step.get("initiator")
    if target.initiators is not None and initiator not in target.initiators:
        raise Refused(
            f"lio set_acl: {initiator!r} is not an initiator the site's profiles let log in to {iqn}"
        )
    if step.get("lun") != 0:
        raise Refused("lio set_acl: an ACL maps LUN 0")
    chap = step.get("chap")
    if chap is None:
        if None not in target.chap:
            raise Refused(f"lio set_acl: {iqn}'s ACLs carry CHAP")
        return
    if not isinstance(chap, dict) or set(chap) - {
        "username",
        "password",
        "mutual_username",
        "mutual_password",
    }:
        raise Refused("lio set_acl: CHAP is a username and a password, and for mutual CHAP the target's")
    names = (chap.get("username"), chap.get("mutual_username", ""))
    if names not in target.chap:
        raise Refused(f"lio set_acl: {iqn}'s CHAP is not for user {names[0]!r} (mutual {names[1]!r})")
    wanted = ["password", *(["mutual_password"] if names[1] else [])]
    if sorted(k for k in chap if "password" in k) != sorted(wanted):
        raise Refused(f"lio set_acl: {iqn}'s CHAP takes {' and '.join(wanted)}")
    for key in wanted:
        if not isinstance(chap[key], str) or not ONE_LINE.fullmatch(chap[key]):
            raise Refused(f"lio set_acl: the CHAP {key} is not one line of text")


def _portals(target: TargetScope) -> str:
    return ", ".join(f"{address}:{port}" for address, port in sorted(target.portals)) or "no portal"


# The login parameters remirror sets on a target (remirror.profile.timeouts.IN_ORDER_TARGET): rtslib
# writes each into the TPG's `param/NAME` file, so a name is a path (an absolute one replaces it).
TARGET_PARAMETERS = frozenset(
    {"InitialR2T", "ImmediateData", "FirstBurstLength", "MaxBurstLength", "MaxRecvDataSegmentLength"}
)
_PARAMETER_VALUE = re.compile(r"[A-Za-z0-9]{1,16}")


def _target_parameters(parameters: Any) -> None:
    if not isinstance(parameters, dict):
        raise Refused("lio: a target's parameters are settings by name")
    for name, value in parameters.items():
        if name not in TARGET_PARAMETERS:
            raise Refused(f"lio: {str(name)[:60]!r} is not a target parameter remirror sets")
        if not isinstance(value, str) or not _PARAMETER_VALUE.fullmatch(value):
            raise Refused(f"lio: {str(value)[:60]!r} is not a value of {name}")
