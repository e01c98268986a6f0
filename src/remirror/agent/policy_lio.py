"""The DR site's wall around LIO (remirror.agent.policy): a target only as the site's own
profiles make it. Another site's controller asks for targets, portals, LUNs and ACLs; the site
checks each against `SiteScope.targets`, so that nothing it asks for widens what the site
serves: CHAP never dropped or for another user, a WireGuard mirror's target never on the plain
network, LUN 0 on its own backstore, ACLs for the initiators the profiles name (the primary's,
which no profile names, by its shape), and a parameter's name never a path (docs/security.md).
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from remirror.agent.observe_lio import LIO_SAVE_PATHS
from remirror.agent.policy import IQN, Checker, Refused
from remirror.protocol import lio

if TYPE_CHECKING:
    from remirror.facts.scope import TargetScope

ONE_LINE = re.compile(r"[ -~]{1,256}")  # printable ASCII: no line break of any kind


def _save(check: Checker, step: lio.LioSave) -> None:
    if step.path not in LIO_SAVE_PATHS:
        raise Refused(f"lio save {step.path[:80]!r}: not where LIO's configuration is restored from")


def _create_backstore(check: Checker, step: lio.LioCreateBackstore) -> None:
    check.backstore(step.name)
    check.device(step.dev)
    served = check.scope.backstores.get(step.name, frozenset()) if check.scope else None
    if served is not None and step.dev not in served:  # a name no target serves: none
        devices = " or ".join(sorted(served)) or "no device (no target of the profiles serves it)"
        raise Refused(f"lio: backstore {step.name} serves {devices} here, no other")


def _delete_backstore(check: Checker, step: lio.LioDeleteBackstore) -> None:
    check.backstore(step.name)


def _delete_target(check: Checker, step: lio.LioDeleteTarget) -> None:
    check.iqn(step.iqn)


def _target(check: Checker, iqn: str, what: str) -> TargetScope | None:
    """A target of the site's scope as its profiles make it (None: a site with no profile)."""
    check.iqn(iqn)
    if check.scope is None:
        return None
    target = check.scope.targets.get(iqn)
    if target is None:
        raise Refused(f"lio {what}: {iqn} is not a target {check._sources()} make on this site")
    return target


def _create_target(check: Checker, step: lio.LioCreateTarget) -> None:
    """CHAP never dropped where the profiles give it (nor made where they do not)."""
    target = _target(check, step.iqn, "create_target")
    _target_parameters(step.parameters)
    if target is not None and step.chap not in {names is not None for names in target.chap}:
        said = "with" if step.chap else "without"
        raise Refused(f"lio create_target: {step.iqn} {said} CHAP is not as {check._sources()} make it")


def _set_parameters(check: Checker, step: lio.LioSetParameters) -> None:
    _target(check, step.iqn, "set_parameters")
    _target_parameters(step.parameters)


def _create_portal(check: Checker, step: lio.LioCreatePortal) -> None:
    """A portal only where the profiles say (a WireGuard mirror's target on its tunnel only)."""
    target = _target(check, step.iqn, "create_portal")
    shown = f"[{step.address}]" if ":" in step.address else step.address
    check.portal(f"{shown}:{step.port}")
    if target is not None and (step.address, step.port) not in target.portals:
        raise Refused(f"lio create_portal: {step.iqn} listens only on {_portals(target)}")


def _create_lun(check: Checker, step: lio.LioCreateLun) -> None:
    target = _target(check, step.iqn, "create_lun")
    check.backstore(step.backstore)
    if target is not None and (step.lun != 0 or step.backstore not in target.backstores):
        raise Refused(f"lio create_lun: {step.iqn}'s LUN 0 serves {' or '.join(sorted(target.backstores))}")


def _set_acl(check: Checker, step: lio.LioSetAcl) -> None:
    """An ACL for an initiator the profiles let log in, LUN 0, under their CHAP user (and the
    target's mutual user when mutual), passwords one line."""
    target = _target(check, step.iqn, "set_acl")
    if not IQN.fullmatch(step.initiator):
        raise Refused(f"lio set_acl: {step.initiator[:80]!r} is not an initiator name")
    if step.lun != 0:
        raise Refused("lio set_acl: an ACL maps LUN 0")
    chap = step.chap
    if chap is not None:
        if bool(chap.mutual_username) != bool(chap.mutual_password):
            raise Refused(f"lio set_acl: {step.iqn}'s mutual CHAP takes the target's user and its password")
        for key, password in (("password", chap.password), ("mutual_password", chap.mutual_password)):
            if (password or key == "password") and not ONE_LINE.fullmatch(password):
                raise Refused(f"lio set_acl: the CHAP {key} is not one line of text")
    if target is None:
        return
    if target.initiators is not None and step.initiator not in target.initiators:
        raise Refused(
            f"lio set_acl: {step.initiator[:80]!r} is not an initiator the site's profiles let log in"
            f" to {step.iqn}"
        )
    if chap is None:
        if None not in target.chap:
            raise Refused(f"lio set_acl: {step.iqn}'s ACLs carry CHAP")
        return
    names = (chap.username, chap.mutual_username)
    if names not in target.chap:
        raise Refused(f"lio set_acl: {step.iqn}'s CHAP is not for user {names[0]!r} (mutual {names[1]!r})")
    for user, key, password in (
        (chap.username, "password", chap.password),
        (chap.mutual_username, "mutual_password", chap.mutual_password),
    ):
        kept = _kept_secrets(target, user, key)
        if kept and not any(hmac.compare_digest(password.encode(), secret.encode()) for secret in kept):
            files = " or ".join(sorted(kept.values()))
            raise Refused(f"lio set_acl: {step.iqn}'s CHAP {key} for {user!r} is not the one in {files} here")


def _kept_secrets(target: TargetScope, user: str, key: str) -> dict[str, str]:
    """The CHAP secrets of `user`'s `key` that this site keeps itself (secret -> its file): a
    profile's `password_file` the site holds too (its Ansible role writes it from the vault).
    None kept (remirror generated it on the controller, or the file is not here): nothing to
    compare with, and nothing widened: the controller that sets it holds it anyway. A file here
    that cannot be read refuses the ACL."""
    kept = {}
    for named, said, path in sorted(target.secret_files):
        if (named, said) == (user, key):
            try:
                kept[Path(path).read_text().strip("\n")] = path
            except FileNotFoundError:
                continue  # not kept here
            except (OSError, UnicodeDecodeError) as error:  # kept, but not read: nothing is taken
                why = getattr(error, "strerror", None) or "not text"
                raise Refused(
                    f"lio set_acl: cannot read {path} here to compare the CHAP {key} with ({why})"
                ) from None
    return kept


def _portals(target: TargetScope) -> str:
    return ", ".join(f"{address}:{port}" for address, port in sorted(target.portals)) or "no portal"


# The login parameters remirror sets on a target (remirror.profile.timeouts.IN_ORDER_TARGET): rtslib
# writes each into the TPG's `param/NAME` file, so a name is a path (an absolute one replaces it).
TARGET_PARAMETERS = frozenset(
    {"InitialR2T", "ImmediateData", "FirstBurstLength", "MaxBurstLength", "MaxRecvDataSegmentLength"}
)
_PARAMETER_VALUE = re.compile(r"[A-Za-z0-9]{1,16}")


def _target_parameters(parameters: Mapping[str, str]) -> None:
    for name, value in parameters.items():
        if name not in TARGET_PARAMETERS:
            raise Refused(f"lio: {name[:60]!r} is not a target parameter remirror sets")
        if not _PARAMETER_VALUE.fullmatch(value):
            raise Refused(f"lio: {value[:60]!r} is not a value of {name}")


LIO_CHECKS: dict[type[Any], Callable[[Checker, Any], None]] = {
    lio.LioSave: _save,
    lio.LioCreateBackstore: _create_backstore,
    lio.LioDeleteBackstore: _delete_backstore,
    lio.LioDeleteTarget: _delete_target,
    lio.LioCreateTarget: _create_target,
    lio.LioSetParameters: _set_parameters,
    lio.LioCreatePortal: _create_portal,
    lio.LioCreateLun: _create_lun,
    lio.LioSetAcl: _set_acl,
}
