"""A mirror's first copy carried by hand (docs/seeding.md): made at the primary, taken at a DR
site, and brought up to date over the link before the array is made over it.

`{"op": "seed", "do": "export", "profile", "mirror", "site", "disk", "to"}` streams the
primary disk into a new file (or stdout, "-"), and `{"op": "seed", "do": "import", "profile",
"mirror", "disk", "from", "allow_destructive"}` writes a seed onto this site's replica disk,
each chunk checked before it is written. Only the site's own operator asks for either
(remirror.agent.policy refuses them to another site's controller), and the profile's names
and disk come from the site's own profile (remirror.cli.seed): a seed's header is only
compared with them. The stream's format and the decisions are remirror.facts.seed's.

Each site keeps a record of the seed it made or took (remirror.agent.seed_records), written
once the stream is whole: a record means the whole seed, checked. `copy_spans` is the step
that brings a replica up to date: the primary copies the chunks whose digests differ through
the replica's iSCSI disk (remirror.catch_up); `device_unwritten` is the create's guard that
nothing wrote a leg since.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import stat
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from remirror.agent.generations import read_record
from remirror.agent.seed_records import forget_record, keep_record
from remirror.errors import RemirrorError
from remirror.facts.parsers import parse_block_stat
from remirror.facts.seed import (
    CHUNK,
    DATA,
    DIGEST_BYTES,
    END,
    MAGIC,
    MAX_HEADER,
    ZERO,
    SeedError,
    SeedHeader,
    SeedRecord,
    StreamDigest,
    chunk_digest,
    export_header,
    header_from_json,
    import_refusal,
    zero_digest,
)
from remirror.facts.site import disk_facts
from remirror.protocol.steps import CopySpans, DeviceUnwritten
from remirror.runner.local import LocalRunner

_run = LocalRunner("agent").run
PROGRESS_EVERY = 10.0  # seconds between progress lines on a terminal


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """Carry out one `seed` request: `{"ok": true, ...}` or `{"ok": false, "message", "usage"}`."""
    do = request.get("do")
    try:
        if do == "export":
            return {"ok": True, **_export(request)}
        if do == "import":
            return {"ok": True, **_import(request)}
        return {"ok": False, "message": f"unknown seed request {do!r}", "usage": False}
    except SeedError as refused:
        return {"ok": False, "message": str(refused), "usage": True}
    except (RemirrorError, OSError) as error:
        text = error.one_line() if isinstance(error, RemirrorError) else str(error)
        return {"ok": False, "message": text, "usage": False}


# --- export: the primary disk into a stream ---------------------------------------------------


def _export(request: dict[str, Any]) -> dict[str, Any]:
    from remirror.agent.observe import observe_disk  # observe imports this module (its records)

    disk, to = str(request["disk"]), str(request["to"])
    found = disk_facts(disk, observe_disk(disk))
    header = export_header(
        str(request["profile"]),
        str(request["mirror"]),
        str(request["site"]),
        found,
        uuid.uuid4().hex,
        time.time(),
    )
    _not_onto_itself(to, disk)
    stream, zero = StreamDigest(header), bytes(CHUNK)
    zero_chunks = 0
    with _output(to) as out, _direct(disk, os.O_RDONLY) as (fd, buffer):
        out.write(header.encode())
        progress = _Progress("seed export", header.size)
        for index in range(header.chunks):
            length = header.chunk_length(index)
            data = _read(fd, buffer, index * CHUNK, length, disk)
            if data == zero[:length]:
                digest = zero_digest(length)
                out.write(ZERO)  # a chunk of zeros is carried in one byte
                zero_chunks += 1
            else:
                digest = chunk_digest(data)
                out.write(DATA + digest + data)
            stream.add(digest)
            progress.at((index + 1) * CHUNK)
        out.write(END + stream.digest())
        out.flush()
        if stat.S_ISREG(os.fstat(out.fileno()).st_mode):  # a pipe has nothing to sync
            os.fsync(out.fileno())
    keep_record(SeedRecord("export", header, disk, found.size, time.time()), "the file holds the whole seed")
    return _summary(header, zero_chunks)


def _not_onto_itself(to: str, disk: str) -> None:
    """A seed file on the disk it is a seed of would be read into itself as it grows."""
    if to == "-":
        return
    with contextlib.suppress(OSError):
        if Path(to).resolve().parent.stat().st_dev == Path(disk).stat().st_rdev:
            raise SeedError(f"{to} is on {disk}, the disk the seed is of: write it onto another disk")


@contextlib.contextmanager
def _output(to: str) -> Iterator[IO[bytes]]:
    """A new file, readable by root only (it holds the disk's data), or stdout ("-")."""
    if to == "-":
        if sys.stdout.isatty():
            raise SeedError("a seed is not written to a terminal: --to FILE, or a pipe")
        yield sys.stdout.buffer
        return
    try:
        fd = os.open(to, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        raise SeedError(f"{to} exists: a seed is written to a new file") from None
    try:
        with os.fdopen(fd, "wb") as out:
            yield out
    except BaseException:
        Path(to).unlink(missing_ok=True)  # ours, made above: a seed cut short is no seed
        raise


# --- import: a stream onto the replica disk ---------------------------------------------------


def _import(request: dict[str, Any]) -> dict[str, Any]:
    from remirror.agent.observe import observe_disk

    disk, profile, mirror = str(request["disk"]), str(request["profile"]), str(request["mirror"])
    with _input(str(request["from"])) as source:
        header = _read_header(source)
        found = disk_facts(disk, observe_disk(disk))
        why = import_refusal(header, profile, mirror, found, request.get("allow_destructive") is True)
        cache = request.get("cache_disk")
        if (
            why is None
            and isinstance(cache, str)
            and disk_facts(cache, observe_disk(cache)).first_sector == "writecache"
        ):
            # A leg behind a writecache that is not loaded (after a boot) looks blank: its newest
            # writes and md's superblock may be in the cache. Never under a cache, whatever the flag.
            why = (
                f"its cache disk {cache} holds a writecache's blocks, which may hold the leg's newest"
                " writes: `remirror destroy` the mirror (it drains the cache), then zero the cache"
                " disk's first 4 KiB"
            )
        if why is not None:
            raise SeedError(why)
        stream, zero = StreamDigest(header), bytes(CHUNK)
        zero_chunks = 0
        # Exclusive: nothing mounted, no array, no LIO export may hold the disk meanwhile.
        with _direct(disk, os.O_WRONLY | os.O_EXCL) as (fd, buffer):
            # The disk changes from here: a seed written in part is no seed, and has no record.
            forget_record(profile, mirror, "import")
            progress = _Progress("seed import", header.size)
            for index in range(header.chunks):
                length, at = header.chunk_length(index), index * CHUNK
                tag = _exactly(source, 1, index)
                if tag == DATA:
                    expected = _exactly(source, DIGEST_BYTES, index)
                    buffer[:length] = _exactly(source, length, index)
                    digest = chunk_digest(memoryview(buffer)[:length])
                    if digest != expected:
                        raise SeedError(
                            f"chunk {index} (byte {at}) does not match its digest: the seed is damaged;"
                            " the disk holds part of it, and no record"
                        )
                elif tag == ZERO:
                    buffer[:length] = zero[:length]
                    digest = zero_digest(length)
                    zero_chunks += 1
                else:
                    raise SeedError(f"chunk {index} (byte {at}) is not a chunk of a seed: it is damaged")
                if index == 0:
                    # Left for the catch-up, which copies it last: the file system's superblock is
                    # in it, and a replica's disk that shows the file system's UUID would be one
                    # the primary's host could mount by it, through iSCSI, until the create.
                    buffer[:length] = zero[:length]
                stream.add(digest)
                _write(fd, buffer, at, length, disk)
                progress.at(at + length)
            if _exactly(source, 1 + DIGEST_BYTES, header.chunks) != END + stream.digest():
                raise SeedError("the seed's end does not match its chunks: it is damaged; no record kept")
            if source.read(1):
                raise SeedError("the seed goes on past its end: it is damaged; no record kept")
            # The disk's last MiB past the seed: a leg record or md 1.0 metadata of what the disk
            # was before would stand for a leg it no longer is (an import over one is consented to).
            buffer[:] = zero
            for at in range(max(header.size, (found.size // CHUNK - 1) * CHUNK), found.size, CHUNK):
                _write(fd, buffer, at, min(CHUNK, found.size - at), disk)
            os.fsync(fd)
    keep_record(SeedRecord("import", header, disk, found.size, time.time()), "the disk holds the whole seed")
    return _summary(header, zero_chunks)


@contextlib.contextmanager
def _input(source: str) -> Iterator[IO[bytes]]:
    if source == "-":
        if sys.stdin.isatty():
            raise SeedError("a seed is not read from a terminal: --from FILE, or a pipe")
        yield sys.stdin.buffer
        return
    try:
        with Path(source).open("rb") as stream:
            yield stream
    except FileNotFoundError:
        raise SeedError(f"{source} does not exist") from None


def _read_header(source: IO[bytes]) -> SeedHeader:
    if source.read(len(MAGIC)) != MAGIC:
        raise SeedError("it is not a remirror seed (version 1)")
    length = int.from_bytes(_exactly(source, 4, None), "big")
    if length > MAX_HEADER:
        raise SeedError(f"its header of {length} bytes is past a seed's {MAX_HEADER}")
    return header_from_json(_exactly(source, length, None))


def _exactly(source: IO[bytes], length: int, index: int | None) -> bytes:
    """`length` bytes of the stream, or SeedError: a seed cut short (a pipe broken, a copy not
    finished) is no seed."""
    data = source.read(length)
    if len(data) != length:
        where = "in its header" if index is None else f"at chunk {index}"
        raise SeedError(f"the seed ends early, {where}: the disk holds part of it, and no record")
    return data


# --- copy_spans: a replica brought up to date through its iSCSI disk --------------------------


def copy_spans(step: CopySpans) -> None:
    """Copy `step.spans` of the primary disk onto the replica leg's iSCSI disk, before the array
    is made over them. Both exclusive: nothing may write the disk while what differs is copied,
    and nothing may have the replica's disk in an array."""
    with (
        _direct(step.source, os.O_RDONLY | os.O_EXCL) as (source, buffer),
        _direct(step.target, os.O_WRONLY | os.O_EXCL) as (target, _),
    ):
        # Never the last MiB of either: the leg record's place and md's metadata, each leg's own;
        # never onto a disk that has been a leg (its record).
        size = min(os.lseek(source, 0, os.SEEK_END), os.lseek(target, 0, os.SEEK_END))
        limit = (size // CHUNK - 1) * CHUNK
        if any(span.offset + span.length > limit for span in step.spans):
            raise RemirrorError(f"copy_spans: a range past byte {limit}, a seed's end")
        if read_record(step.target) is not None:
            raise RemirrorError(f"copy_spans: {step.target} carries a leg record: it has been a leg since")
        for span in step.spans:
            for at in range(span.offset, span.offset + span.length, CHUNK):
                length = min(CHUNK, span.offset + span.length - at)
                _read(source, buffer, at, length, step.source)
                _write(target, buffer, at, length, step.target)
        os.fsync(target)
    # Closing a disk written to starts udev's look at it (blkid, a partition table re-read, which
    # holds the disk exclusively for a moment): done before the next step, an md_create.
    _run(["udevadm", "settle", "--timeout=10"], ok_codes=(0, 1))


def device_unwritten(step: DeviceUnwritten) -> None:
    """The create's guard: nothing wrote or discarded on the leg since the catch-up measured it."""
    if step.written < 0 or step.discarded < 0:
        raise RemirrorError(f"{step.device}: not measured by a catch-up in this apply: apply again")
    block = Path("/sys/class/block") / Path(os.path.realpath(step.device)).name
    counters = parse_block_stat((block / "stat").read_text())
    writing = int((block / "inflight").read_text().split()[1])  # reads in flight (udev's) are none of it
    if (counters.sectors_written, counters.sectors_discarded) != (step.written, step.discarded) or writing:
        raise RemirrorError(
            f"{step.device} was written since the catch-up compared it: nothing may use it until"
            " apply has made the mirror; apply again"
        )


# --- disks, records, progress -----------------------------------------------------------------


@contextlib.contextmanager
def _direct(path: str, flags: int) -> Iterator[tuple[int, mmap.mmap]]:
    """The device opened past the page cache, and a page-aligned buffer of a chunk for it."""
    try:
        fd = os.open(path, flags | os.O_DIRECT)
    except OSError as error:
        if error.errno == 16:  # EBUSY from O_EXCL: mounted, in an array, held by dm or LIO
            raise SeedError(f"{path} is in use (mounted, or held by md, device-mapper or LIO)") from None
        raise
    buffer = mmap.mmap(-1, CHUNK)
    try:
        yield fd, buffer
    finally:
        os.close(fd)
        buffer.close()


def _read(fd: int, buffer: mmap.mmap, at: int, length: int, path: str) -> bytes:
    view = memoryview(buffer)[:length]
    try:
        if os.preadv(fd, [view], at) != length:
            raise RemirrorError(f"{path}: short read at byte {at}")
    finally:
        view.release()
    return buffer[:length]


def _write(fd: int, buffer: mmap.mmap, at: int, length: int, path: str) -> None:
    view = memoryview(buffer)[:length]
    try:
        if os.pwritev(fd, [view], at) != length:
            raise RemirrorError(f"{path}: short write at byte {at}")
    finally:
        view.release()


def _summary(header: SeedHeader, zero_chunks: int) -> dict[str, Any]:
    return {
        "seed": header.seed,
        "size": header.size,
        "chunks": header.chunks,
        "zero_chunks": zero_chunks,
        "file_system": f"{header.fs_type} {header.fs_uuid}",
    }


class _Progress:
    """A line on the operator's terminal now and then (none in a pipe or a log)."""

    def __init__(self, what: str, total: int) -> None:
        self.what, self.total = what, total
        self.started = self.last = time.monotonic()
        self.shown = sys.stderr.isatty()

    def at(self, done: int) -> None:
        now = time.monotonic()
        if not self.shown or now - self.last < PROGRESS_EVERY:
            return
        self.last = now
        rate = done / max(now - self.started, 1e-3) / 1e6
        shown = f"{done >> 20} of {self.total >> 20} MiB, {rate:.0f} MB/s"
        sys.stderr.write(f"{self.what}: {100 * done // self.total}% ({shown})\n")
