"""The commands a site's agent runs, typed: each builds its own argv from checked fields. Pure.

No step carries a command line. A command is one class per thing remirror
asks of mdadm, iscsiadm, dmsetup or dd, with typed fields (an md array, a
device, a target and its portal, a device-mapper name and table); the site's
policy checks the fields against its scope (remirror.agent.policy_steps),
and the site builds the argv from them (`argv`), so nothing the sender wrote
reaches a command line but a field the check has seen whole. `ok_codes`
besides 0 mean "already so"; `explain` gives a person's words for an exit
code, in front of the tool's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import ClassVar, Literal

from remirror.protocol.tables import DmTarget
from remirror.protocol.wire import Step

MiB = 1024 * 1024
MD_MEMBER_OPS = ("add", "re-add", "fail", "remove")
MdMemberOp = Literal["add", "re-add", "fail", "remove"]
NodeOp = Literal["new", "delete", "login", "logout"]


@dataclass(frozen=True)
class Command(Step):
    """A tool run on the site, its argv built there from the typed fields."""

    _: KW_ONLY
    ok_codes: tuple[int, ...] = (0,)
    explain: Mapping[int, str] = field(default_factory=dict)
    TIMEOUT: ClassVar[float] = 120  # seconds: a command of remirror's that runs longer is hung

    def argv(self) -> tuple[str, ...]:
        raise NotImplementedError


@dataclass(frozen=True)
class MdStop(Command):
    """`mdadm --stop MD`."""

    kind: ClassVar[str] = "md_stop"
    md: str

    def argv(self) -> tuple[str, ...]:
        return ("mdadm", "--stop", self.md)


@dataclass(frozen=True)
class MdReadWrite(Command):
    """`mdadm --readwrite MD`: an array assembled auto-read-only starts its pending resync."""

    kind: ClassVar[str] = "md_readwrite"
    md: str

    def argv(self) -> tuple[str, ...]:
        return ("mdadm", "--readwrite", self.md)


@dataclass(frozen=True)
class MdMember(Command):
    """`mdadm MD --OP DEVICE`: a leg added, re-added, failed or removed. For `fail` and `remove`,
    DEVICE may be md's own word for the members whose disk went (`detached`) or failed (`failed`)."""

    kind: ClassVar[str] = "md_member"
    md: str
    op: MdMemberOp
    device: str

    def argv(self) -> tuple[str, ...]:
        return ("mdadm", self.md, f"--{self.op}", self.device)


@dataclass(frozen=True)
class MdZeroSuperblock(Command):
    """`mdadm --zero-superblock DEVICE`: the leg's md superblock cleared (its data stays)."""

    kind: ClassVar[str] = "md_zero_superblock"
    device: str

    def argv(self) -> tuple[str, ...]:
        return ("mdadm", "--zero-superblock", self.device)


@dataclass(frozen=True)
class MdBitmap(Command):
    """`mdadm --grow MD --bitmap=...`: the write-intent bitmap removed (`chunk` None) or made
    internal with a chunk of `chunk` bytes."""

    kind: ClassVar[str] = "md_bitmap"
    md: str
    chunk: int | None

    def argv(self) -> tuple[str, ...]:
        if self.chunk is None:
            return ("mdadm", "--grow", self.md, "--bitmap=none")
        return ("mdadm", "--grow", self.md, "--bitmap=internal", f"--bitmap-chunk={self.chunk // 1024}K")


@dataclass(frozen=True)
class MdCreate(Command):
    """`mdadm --create`: a RAID1 array of `legs` in slot order (`missing`: a slot left free for a
    leg added later), named `name`, of `size` bytes (short of each leg's last MiB), with an
    internal bitmap; `write_behind` for async mode; `assume_clean`: legs proven blank."""

    kind: ClassVar[str] = "md_create"
    md: str
    name: str
    uuid: str
    metadata: Literal["1.0", "1.2"]
    legs: tuple[str, ...]
    bitmap_chunk: int
    size: int
    write_behind: int | None = None
    assume_clean: bool = False

    def argv(self) -> tuple[str, ...]:
        return (
            "mdadm", "--create", self.md, "--run", f"--metadata={self.metadata}", "--level=1",
            f"--raid-devices={len(self.legs)}", f"--uuid={self.uuid}", f"--name={self.name}",
            "--homehost=<none>", "--bitmap=internal", f"--bitmap-chunk={self.bitmap_chunk // 1024}K",
            f"--size={self.size // MiB}M",
            *((f"--write-behind={self.write_behind}",) if self.write_behind is not None else ()),
            *(("--assume-clean",) if self.assume_clean else ()),
            *self.legs,
        )  # fmt: skip


@dataclass(frozen=True)
class IscsiNode(Command):
    """`iscsiadm -m node -T TARGET -p ADDRESS:PORT` with one operation: the node record made
    (`new`) or deleted, its session logged in or out."""

    kind: ClassVar[str] = "iscsi_node"
    target: str
    address: str
    port: int
    op: NodeOp

    def argv(self) -> tuple[str, ...]:
        operation = ("--login",) if self.op == "login" else ("--logout",) if self.op == "logout" else ()
        return (*node_argv(self.target, self.address, self.port), *(operation or ("-o", self.op)))


@dataclass(frozen=True)
class IscsiNodeUpdate(Command):
    """`iscsiadm ... -o update` of node settings, every pair in one run (each iscsiadm costs a
    quarter of a second under emulation). Never a password: those go through NodeSecrets."""

    kind: ClassVar[str] = "iscsi_node_update"
    target: str
    address: str
    port: int
    settings: Mapping[str, str]

    def argv(self) -> tuple[str, ...]:
        pairs = (arg for key, value in self.settings.items() for arg in ("-n", key, "-v", value))
        return (*node_argv(self.target, self.address, self.port), "-o", "update", *pairs)


def node_argv(target: str, address: str, port: int) -> tuple[str, ...]:
    """`iscsiadm` addressing the node record of `target` at `address`:`port`."""
    shown = f"[{address}]" if ":" in address else address
    return ("iscsiadm", "-m", "node", "-T", target, "-p", f"{shown}:{port}")


@dataclass(frozen=True)
class DmCreate(Command):
    """`dmsetup create NAME --table TABLE`."""

    kind: ClassVar[str] = "dm_create"
    name: str
    table: DmTarget

    def argv(self) -> tuple[str, ...]:
        return ("dmsetup", "create", self.name, "--table", self.table.text())


@dataclass(frozen=True)
class DmRemove(Command):
    """`dmsetup remove NAME`."""

    kind: ClassVar[str] = "dm_remove"
    name: str

    def argv(self) -> tuple[str, ...]:
        return ("dmsetup", "remove", self.name)


@dataclass(frozen=True)
class ZeroHead(Command):
    """A cache disk's first 4 KiB zeroed: what dm-writecache reads for a superblock, dm-cache for
    its metadata, so that no old one is taken up."""

    kind: ClassVar[str] = "zero_head"
    device: str

    def argv(self) -> tuple[str, ...]:
        # conv=nocreat: a path that is not there is an error, never a new file under /dev.
        zeroes = ("if=/dev/zero", f"of={self.device}", "bs=4096", "count=1", "oflag=direct", "conv=nocreat")
        return ("dd", *zeroes, "status=none")


COMMANDS: tuple[type[Command], ...] = (
    MdStop, MdReadWrite, MdMember, MdZeroSuperblock, MdBitmap, MdCreate, IscsiNode, IscsiNodeUpdate,
    DmCreate, DmRemove, ZeroHead,
)  # fmt: skip
