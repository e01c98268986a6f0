"""A seed's catch-up (docs/seeding.md): the chunks of a new mirror's primary leg that differ from
a replica's seed, copied onto the replica before the array is made over them (remirror.plan.seed).

Each site hashes its own leg in chunks (the agent's `digest` op, from byte 0:
there is no array yet), both at once, and only the digests cross the link, 16
bytes a MiB. The primary then copies the chunks whose digests differ through
the replica's iSCSI disk (`copy_spans` steps, remirror.agent.seed), and the
replica hashes them again: the action is done when every chunk compared equal.

The primary's disk must not change meanwhile (a write after its chunk was
hashed would be on one leg only): its write counter is read before and after,
and any write between fails the action, with nothing made. The replica's disk
is written by nothing but the primary's copy: its site exports it to the
primary's initiator alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from remirror.errors import RemirrorError
from remirror.facts.seed import CHUNK
from remirror.plan.estimate import parse_block_stat
from remirror.plan.seed import CatchUpSeed
from remirror.protocol.steps import ByteRange, CopySpans

if TYPE_CHECKING:
    from remirror.agent.client import AgentClient
    from remirror.controller import Controller

HASH_BATCH = 256  # chunks per digest request: 256 MiB read per answer
COPY_BYTES = 64 * CHUNK  # per copy_spans step: a step's answer comes back within minutes
SLOWEST_LINK = 125_000  # bytes a second (1 Mbit/s): what the controller waits for a step to cross


@dataclass(frozen=True)
class CaughtUp:
    """What a catch-up compared and copied."""

    chunks: int
    differing: int
    copied: int  # bytes

    def describe(self) -> str:
        return (
            f"{self.differing} of {self.chunks} chunks differed from the seed:"
            f" {self.copied / CHUNK:.0f} MiB copied"
        )


def catch_up(controller: Controller, site: str, step: CatchUpSeed) -> CaughtUp:
    """Bring `step.replica_site`'s seed up to date with `site`'s (the primary's) leg."""
    chunks = [ByteRange(at, min(CHUNK, step.size - at)) for at in range(0, step.size, CHUNK)]
    primary, replica = controller.clients[site], controller.clients[step.replica_site]
    before = _written(primary, step.source)
    with ThreadPoolExecutor(max_workers=2) as pool:  # both sites read their disk at once
        mine = pool.submit(_hash, primary, step.source, chunks)
        theirs = pool.submit(_hash, replica, step.replica_device, chunks)
        ours, seeds = mine.result(), theirs.result()
    differing = [i for i, (a, b) in enumerate(zip(ours, seeds, strict=True)) if a != b]
    for group in _groups([chunks[i] for i in differing]):
        copy = CopySpans(
            step.mirror, step.source, step.target, group, 60 + sum(r.length for r in group) / SLOWEST_LINK
        )
        (result,) = primary.run([copy.as_dict()]) or [{"ok": False, "error": "not run"}]
        if not result["ok"]:
            raise RemirrorError(f"{site}: copying onto {step.target}: {result['error']}")
    if _written(primary, step.source) != before:
        raise RemirrorError(
            f"{site}: {step.source} was written during the catch-up: nothing may use it until apply"
            " has made the mirror; apply again"
        )
    again = _hash(replica, step.replica_device, [chunks[i] for i in differing])
    if again != [ours[i] for i in differing]:
        raise RemirrorError(f"{step.replica_site}: {step.replica_device} does not hold what was copied")
    return CaughtUp(len(chunks), len(differing), sum(chunks[i].length for i in differing))


def _hash(client: AgentClient, disk: str, chunks: list[ByteRange]) -> list[str]:
    found: list[str] = []
    for start in range(0, len(chunks), HASH_BATCH):
        spans = [(r.offset, r.length) for r in chunks[start : start + HASH_BATCH]]
        found += client.digests(disk, spans, raw=True)
    return found


def _written(client: AgentClient, device: str) -> int:
    """Sectors written to `device` since boot (its /sys/class/block stat)."""
    stat = client.request({"op": "block_stats", "devices": [device]})["stats"].get(device)
    if not stat:
        raise RemirrorError(f"{client.name}: {device} does not exist")
    return parse_block_stat(stat)[1]


def _groups(chunks: list[ByteRange]) -> Iterator[tuple[ByteRange, ...]]:
    """Adjacent chunks joined into ranges, in steps of at most COPY_BYTES."""
    group: list[ByteRange] = []
    size = 0
    for chunk in chunks:
        if size + chunk.length > COPY_BYTES:
            yield tuple(group)
            group, size = [], 0
        last = group[-1] if group else None
        if last is not None and last.offset + last.length == chunk.offset:
            group[-1] = ByteRange(last.offset, last.length + chunk.length)
        else:
            group.append(chunk)
        size += chunk.length
    if group:
        yield tuple(group)
