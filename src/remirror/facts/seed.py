"""Seeds: a mirror's first copy carried to the DR site, and the records of one. Pure.

A seed is a stream (a file carried on a disk, or a pipe over SSH on a LAN):

    MAGIC
    4-byte length, then the header: JSON (profile, mirror, seed id, size, ...)
    per chunk, in order: b"D", its digest, its bytes; or b"Z" for a chunk of zeros
    b"E", then the digest of the header and of every chunk's digest, in order

Each chunk is checked as it is read, so a seed import writes nothing it has
not checked; the end's digest says no chunk was lost, doubled or reordered
and the stream was read to its end. Zero chunks take a byte: a disk mostly
empty is carried in little more than its data.

Records say which seed a site made (`export`, at the primary) or took
(`import`, at a DR site), in /var/lib/remirror/seeds; `apply` builds a
mirror with `initial_sync: seeded` only from a seed whose two records agree
(remirror.plan.seed). Everything here reads what another host wrote (the
header comes from a file the operator carried, records from another site's
agent): each field is checked for its type and range, names matched
exactly, and what does not check is no seed.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from remirror.facts.model import BELIEVED_TIMES, Signature

if TYPE_CHECKING:  # facts.site holds a site's seed records: it imports this module
    from remirror.facts.site import DiskFacts

MAGIC = b"REMIRROR-SEED 1\n"
DATA, ZERO, END = b"D", b"Z", b"E"
DIGEST_BYTES = 16  # blake2b-128, as remirror.agent.digest: the digest pass compares these
MAX_HEADER = 64 * 1024
CHUNK = 1024 * 1024  # what a seed carries per digest; the catch-up compares the same chunks
ALIGN = 4096
MAX_SIZE = 1 << 56  # 64 PiB: no disk of a small business's is larger
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
SEED_ID = re.compile(r"[0-9a-f]{32}")
FS_UUID = re.compile(r"[0-9A-Fa-f][0-9A-Fa-f-]{0,63}")
# The file systems keep_data keeps (remirror.plan.keep_data.KEEPABLE): a seed is always of one.
FS_TYPES = ("ext2", "ext3", "ext4", "xfs")
Role = Literal["export", "import"]
ROLES: tuple[Role, ...] = ("export", "import")
# Where a site keeps its seed records: one of remirror's directories, never a path a request names.
SEED_DIR = "/var/lib/remirror/seeds"
MAX_RECORDS = 256  # read by observe: more is not a site's own doing


class SeedError(ValueError):
    """A seed or a record that does not check; the message says what, in one line."""


@dataclass(frozen=True)
class SeedHeader:
    """What a seed is of: a mirror's primary disk, at one time."""

    profile: str
    mirror: str
    seed: str  # 32 hex digits, made at export: the records of one seed name it
    site: str  # the primary it was made at
    size: int  # bytes of the disk it carries, from byte 0
    chunk: int
    created: float  # epoch seconds the export began
    fs_type: str  # the file system keep_data keeps, as libblkid names it
    fs_uuid: str

    @property
    def chunks(self) -> int:
        """How many chunks the stream carries (the last may be shorter)."""
        return -(-self.size // self.chunk)

    def chunk_length(self, index: int) -> int:
        """The bytes of chunk `index`."""
        return min(self.chunk, self.size - index * self.chunk)

    def encode(self) -> bytes:
        """MAGIC, the length and the JSON: what a stream starts with."""
        body = json.dumps(asdict(self), sort_keys=True).encode()
        return MAGIC + len(body).to_bytes(4, "big") + body


def header_from_json(body: bytes) -> SeedHeader:
    """The header a stream carries, checked field by field; SeedError if anything is off."""
    try:
        fields = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise SeedError("its header is not JSON") from None
    return SeedHeader(**_checked(fields, "header"))


def _checked(fields: Any, what: str) -> dict[str, Any]:
    """The fields of a header (and of a record's seed) as their types and ranges allow."""
    if not isinstance(fields, dict):
        raise SeedError(f"its {what} is not an object")
    names = {"profile", "mirror", "seed", "site", "size", "chunk", "created", "fs_type", "fs_uuid"}
    if set(fields) != names:
        odd = sorted(set(fields) ^ names)
        raise SeedError(f"its {what} has other fields than a seed's: {', '.join(odd)}")
    for key in ("profile", "mirror", "site"):
        _text(fields[key], NAME, f"{what} {key}")
    _text(fields["seed"], SEED_ID, f"{what} seed id")
    _text(fields["fs_uuid"], FS_UUID, f"{what} file system UUID")
    if fields["fs_type"] not in FS_TYPES:
        raise SeedError(f"its {what} names a {fields['fs_type']!r} file system: a seed is of {FS_TYPES}")
    size, chunk = fields["size"], fields["chunk"]
    if not _whole(size) or not 0 < size <= MAX_SIZE or size % ALIGN:
        raise SeedError(f"its {what} size {size!r} is not a whole number of 4 KiB blocks")
    if chunk != CHUNK:
        raise SeedError(f"its {what} chunk of {chunk!r} bytes is not a seed's {CHUNK}")
    if not _time(fields["created"]):
        raise SeedError(f"its {what} time {fields['created']!r} is not a time")
    return {**fields, "created": float(fields["created"])}


def _time(value: Any) -> bool:
    """A time between 2001 and 2100, in epoch seconds."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return number and math.isfinite(value) and BELIEVED_TIMES[0] <= value <= BELIEVED_TIMES[1]


def _text(value: Any, pattern: re.Pattern[str], what: str) -> None:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise SeedError(f"its {what} {value!r} is not one")


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def chunk_digest(data: bytes | memoryview) -> bytes:
    """A chunk's digest, as remirror.agent.digest makes it (hex there, raw here)."""
    return hashlib.blake2b(data, digest_size=DIGEST_BYTES).digest()


@functools.cache
def zero_digest(length: int) -> bytes:
    """The digest of `length` zero bytes: a disk's empty chunks, hashed once, not once each."""
    return chunk_digest(bytes(length))


class StreamDigest:
    """The end's digest: of the header, then of each chunk's digest in order."""

    def __init__(self, header: SeedHeader) -> None:
        self._hash = hashlib.blake2b(header.encode(), digest_size=DIGEST_BYTES)

    def add(self, digest: bytes) -> None:
        self._hash.update(digest)

    def digest(self) -> bytes:
        return self._hash.digest()


@dataclass(frozen=True)
class SeedRecord:
    """A site's record of a seed: made here from its primary disk (`export`), or written onto
    its replica disk whole and checked (`import`)."""

    role: Role
    header: SeedHeader
    disk: str  # the profile's path of the disk it was read from or written to
    disk_size: int  # that disk's size then: another disk under the same name is not it
    done: float  # epoch seconds it finished

    def as_json(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "seed": asdict(self.header),
            "disk": self.disk,
            "disk_size": self.disk_size,
            "done": self.done,
        }

    def file_name(self) -> str:
        """Its file in SEED_DIR."""
        return record_file_name(self.header.profile, self.header.mirror, self.role)

    def of(self, profile: str, mirror: str, role: Role) -> bool:
        """Whether it is the record of `role` for this profile's `mirror` (names matched exactly)."""
        return (self.role, self.header.profile, self.header.mirror) == (role, profile, mirror)


def record_file_name(profile: str, mirror: str, role: Role) -> str:
    """A record's file in SEED_DIR: one per profile, mirror and role (a new seed replaces the last)."""
    return f"{profile}.{mirror}.{role}.json"


def record_from_json(body: Any) -> SeedRecord:
    """A record as a site reports it; SeedError if it does not check."""
    if not isinstance(body, dict) or set(body) != {"role", "seed", "disk", "disk_size", "done"}:
        raise SeedError("a seed record has the fields role, seed, disk, disk_size and done")
    if body["role"] not in ROLES:
        raise SeedError(f"a seed record's role {body['role']!r} is not one of {ROLES}")
    disk, done = body["disk"], body["done"]
    if not isinstance(disk, str) or not disk.startswith("/") or len(disk) > 4096:
        raise SeedError(f"a seed record's disk {disk!r} is not a path")
    if not _time(done):
        raise SeedError(f"a seed record's time {done!r} is not a time")
    size = body["disk_size"]
    if not _whole(size) or not 0 < size <= MAX_SIZE:
        raise SeedError(f"a seed record's disk size {size!r} is not a size")
    header = SeedHeader(**_checked(body["seed"], "record"))
    return SeedRecord(body["role"], header, disk, size, float(done))


def records_from_json(bodies: Any) -> tuple[SeedRecord, ...]:
    """The records a site reported, those that check (one that does not is no record: a plan
    that needs it says the seed is missing)."""
    found = []
    for body in bodies if isinstance(bodies, list) else []:
        try:
            found.append(record_from_json(body))
        except SeedError:
            continue
    return tuple(found[:MAX_RECORDS])


# --- what a site decides before it reads or writes a disk for a seed ------------------------


def export_header(profile: str, mirror: str, site: str, disk: DiskFacts, seed: str, now: float) -> SeedHeader:
    """The header of a seed of `disk` (a primary disk whose file system keep_data keeps), or
    SeedError saying why there is none to make. It carries the disk but its last MiB (the leg
    record's place, the site's own: docs/failover.md)."""
    if not disk.exists:
        raise SeedError(f"{disk.path} does not exist")
    found = [s for s in disk.signatures if s.kind == "filesystem"]
    if len(found) != 1 or found[0].type not in FS_TYPES or not found[0].uuid:
        raise SeedError(
            f"{disk.path} does not start with an ext2/3/4 or XFS file system with a UUID: a seed is"
            " of the file system keep_data keeps"
        )
    size = (disk.size // CHUNK - 1) * CHUNK
    if size <= 0:
        raise SeedError(f"{disk.path} is smaller than 2 MiB")
    fs = found[0]
    return SeedHeader(profile, mirror, seed, site, size, CHUNK, now, fs.type, fs.uuid or "")


def same_file_system(signature: Signature, header: SeedHeader) -> bool:
    """Whether `signature` is the file system the seed was made of (its type and UUID)."""
    return signature.kind == "filesystem" and (signature.type, signature.uuid) == (
        header.fs_type,
        header.fs_uuid,
    )


def import_refusal(
    header: SeedHeader, profile: str, mirror: str, disk: DiskFacts, allow_destructive: bool
) -> str | None:
    """Why the seed `header` may not be written onto `disk` (the replica disk of `profile`'s
    `mirror`, by this site's profile, its head probed), or None. Only a blank disk, or one that
    holds a seed taken before (blank-looking too: an import leaves the first chunk for the
    catch-up, below), is written without the operator's word; a leg's own points or a cache's
    blocks never are: they go by their own verbs."""
    if (header.profile, header.mirror) != (profile, mirror):
        return (
            f"the seed is of mirror {header.mirror} of profile {header.profile}, not of {mirror} of {profile}"
        )
    if not disk.exists:
        return f"{disk.path} does not exist"
    if disk.users():
        return f"{disk.path} is in use ({'; '.join(disk.users())})"
    if header.size > disk.size:
        return f"the seed carries {header.size} bytes, and {disk.path} has {disk.size}"
    if disk.first_sector == "cdp":
        return f"{disk.path} holds a leg's own recovery points: they go only by their own verbs (docs/cdp.md)"
    if disk.first_sector == "writecache":
        return f"{disk.path} holds a writecache's blocks: a cache's disk is not a mirror's leg"
    own = (disk.leg_record is not None and disk.leg_record.mirror == mirror) or (
        disk.superblock is not None and disk.superblock.name == mirror
    )
    if own:
        held = (
            f"mirror {mirror}'s own leg: after a promotion it may hold the mirror's newest data;"
            " write over it only if the primary's data is the one to keep"
        )
    elif disk.leg_record is not None:
        held = f"the leg record of mirror {disk.leg_record.mirror}: it has been a leg of a mirror"
    elif disk.signatures:
        held = ", ".join(s.describe() for s in disk.signatures)
    elif disk.first_sector != "zero":
        held = "data at its start (no signature, but not zeros)"
    else:
        return None
    if allow_destructive:
        return None
    return f"{disk.path} holds {held}; the import writes over it (--allow-destructive if it may go)"
