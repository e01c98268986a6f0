"""The LIO operations a site's agent carries out with rtslib-fb, typed. Pure.

One class per operation, each with the fields its handler reads
(remirror.agent.lio_steps) and its policy checks (remirror.agent.policy_lio):
a backstore on a device, a target with or without CHAP and its login
parameters, a portal, LUN 0, an ACL for an initiator with its CHAP, the
saved configuration. A password travels in an ACL's CHAP and is listed in
`secrets`, for redaction wherever the step is logged or reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from remirror.protocol.wire import Step


@dataclass(frozen=True)
class LioSave(Step):
    """LIO's running configuration saved to `path` (where it is restored from at boot)."""

    kind: ClassVar[str] = "lio_save"
    path: str


@dataclass(frozen=True)
class LioCreateBackstore(Step):
    """A block backstore `name` on device `dev`."""

    kind: ClassVar[str] = "lio_create_backstore"
    name: str
    dev: str


@dataclass(frozen=True)
class LioDeleteBackstore(Step):
    """Backstore `name` deleted: the LIO object only, the disk and its data stay as they are."""

    kind: ClassVar[str] = "lio_delete_backstore"
    name: str


@dataclass(frozen=True)
class LioDeleteTarget(Step):
    """Target `iqn` deleted, its TPGs with their portals, LUNs and ACLs."""

    kind: ClassVar[str] = "lio_delete_target"
    iqn: str


@dataclass(frozen=True)
class LioCreateTarget(Step):
    """Target `iqn` with TPG 1, CHAP on or off, no generated ACLs, its login `parameters`
    (remirror.profile.timeouts.IN_ORDER_TARGET: taken at the initiator's next login)."""

    kind: ClassVar[str] = "lio_create_target"
    iqn: str
    chap: bool
    parameters: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class LioSetParameters(Step):
    """Login parameters of target `iqn`'s TPG 1."""

    kind: ClassVar[str] = "lio_set_parameters"
    iqn: str
    parameters: Mapping[str, str]


@dataclass(frozen=True)
class LioCreatePortal(Step):
    """A portal of target `iqn` at `address`:`port`."""

    kind: ClassVar[str] = "lio_create_portal"
    iqn: str
    address: str
    port: int


@dataclass(frozen=True)
class LioCreateLun(Step):
    """LUN `lun` of target `iqn` on backstore `backstore`."""

    kind: ClassVar[str] = "lio_create_lun"
    iqn: str
    lun: int
    backstore: str


@dataclass(frozen=True)
class AclChap:
    """An ACL's CHAP: the initiator's user and password, and the target's for mutual CHAP."""

    username: str
    password: str
    mutual_username: str = ""
    mutual_password: str = ""


@dataclass(frozen=True)
class LioSetAcl(Step):
    """An ACL of target `iqn` for `initiator`, mapping LUN `lun` as LUN 0, with `chap` (None: none)."""

    kind: ClassVar[str] = "lio_set_acl"
    iqn: str
    initiator: str
    lun: int
    chap: AclChap | None = None
    secrets: tuple[str, ...] = ()


LIO_STEPS: tuple[type[Step], ...] = (
    LioSave, LioCreateBackstore, LioDeleteBackstore, LioDeleteTarget, LioCreateTarget, LioSetParameters,
    LioCreatePortal, LioCreateLun, LioSetAcl,
)  # fmt: skip
