"""The LIO operations of the protocol's catalogue (remirror.protocol.lio), carried out with
rtslib-fb: each handler reads its step's typed fields, checked by remirror.agent.policy_lio.
rtslib is imported in each: only sites that run LIO need it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from remirror.agent.observe_lio import keep_site_dbroot
from remirror.errors import RemirrorError
from remirror.protocol import lio

if TYPE_CHECKING:
    from rtslib_fb import TPG


def _save(step: lio.LioSave) -> None:
    from rtslib_fb import RTSRoot

    Path(step.path).parent.mkdir(parents=True, exist_ok=True)
    RTSRoot().save_to_file(step.path)  # rtslib writes it 0600, temp file + rename


def _fresh_backstores() -> None:
    """Forget rtslib's cache of where each backstore lives (`tcm.bs_cache`, filled once per
    process): another process may have deleted or made one since (a restart, another agent), and
    a stale entry makes rtslib look for a backstore in the wrong place or refuse to make one (seen
    in the lab: a kept agent's delete looked in `iblock_1` for a backstore made again elsewhere).
    Emptied, rtslib reads configfs again at its next lookup."""
    from rtslib_fb import tcm

    tcm.bs_cache.clear()


def _create_backstore(step: lio.LioCreateBackstore) -> None:
    from rtslib_fb import BlockStorageObject

    _fresh_backstores()
    BlockStorageObject(step.name, dev=step.dev)


def _delete_backstore(step: lio.LioDeleteBackstore) -> None:
    from rtslib_fb import RTSRoot

    _fresh_backstores()
    # Found where configfs has it now, by its exact name. Only the LIO object: the disk and its
    # data stay. Gone already (another agent deleted it): nothing to do.
    for found in [so for so in RTSRoot().storage_objects if so.name == step.name and so.plugin == "block"]:
        found.delete()


def _delete_target(step: lio.LioDeleteTarget) -> None:
    from rtslib_fb import FabricModule, Target

    Target(FabricModule("iscsi"), step.iqn, mode="lookup").delete()  # its TPGs, portals, LUNs, ACLs


def _tpg(iqn: str, create: bool = False) -> TPG:
    from rtslib_fb import TPG, FabricModule, Target

    mode = "create" if create else "lookup"
    return TPG(Target(FabricModule("iscsi"), iqn, mode=mode), 1, mode=mode)


def _parameters(tpg: TPG, parameters: Mapping[str, str]) -> None:
    # Login parameters (remirror.profile.timeouts, IN_ORDER_TARGET): taken at the next login.
    for name, value in parameters.items():
        if not name.isalnum():  # rtslib writes it into param/NAME: a name, not a path
            raise RemirrorError(f"{name!r} is not a target parameter")
        tpg.set_parameter(name, value)


def _create_target(step: lio.LioCreateTarget) -> None:
    tpg = _tpg(step.iqn, create=True)
    _parameters(tpg, step.parameters)
    tpg.set_attribute("authentication", "1" if step.chap else "0")
    tpg.set_attribute("generate_node_acls", "0")
    tpg.enable = True


def _set_parameters(step: lio.LioSetParameters) -> None:
    _parameters(_tpg(step.iqn), step.parameters)


def _create_portal(step: lio.LioCreatePortal) -> None:
    from rtslib_fb import NetworkPortal

    NetworkPortal(_tpg(step.iqn), step.address, step.port, mode="create")


def _create_lun(step: lio.LioCreateLun) -> None:
    from rtslib_fb import LUN, RTSRoot

    tpg = _tpg(step.iqn)
    _fresh_backstores()
    backstore = next((s for s in RTSRoot().storage_objects if s.name == step.backstore), None)
    if backstore is None:
        raise RemirrorError(f"no LIO backstore {step.backstore}")
    LUN(tpg, step.lun, backstore)


def _set_acl(step: lio.LioSetAcl) -> None:
    from rtslib_fb import MappedLUN, NodeACL

    acl = NodeACL(_tpg(step.iqn), step.initiator, mode="any")
    if not any(m.mapped_lun == 0 for m in acl.mapped_luns):
        MappedLUN(acl, 0, step.lun)
    # The CHAP the step says, and nothing left from before: a mutual CHAP the profile dropped is
    # cleared, as is CHAP on a target that no longer asks for it (rtslib writes "" as LIO's NULL).
    chap = step.chap or lio.AclChap("", "")
    acl.chap_userid, acl.chap_password = chap.username, chap.password
    acl.chap_mutual_userid, acl.chap_mutual_password = chap.mutual_username, chap.mutual_password


def _at_site_dbroot(handler: Callable[[Any], None]) -> Callable[[Any], None]:
    """The handler, after rtslib is told to leave LIO's dbroot where the site keeps it: rtslib
    opens its root inside many calls (a backstore's creation among them), so every handler's
    rtslib objects, its own RTSRoot() included, are made after this."""

    def run(step: Any) -> None:
        keep_site_dbroot()
        handler(step)

    return run


_HANDLERS: dict[type[Any], Callable[[Any], None]] = {
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
LIO_HANDLERS = {kind: _at_site_dbroot(handler) for kind, handler in _HANDLERS.items()}
