"""A seed's catch-up (docs/seeding.md): the chunks of a new mirror's primary leg that differ from
a replica's seed, copied onto the replica before the array is made over them (remirror.plan.seed).

Each site hashes its own leg in chunks (the agent's `digest` op, from byte 0:
there is no array yet), both at once, and only the digests cross the link, 16
bytes a MiB. The primary then copies the chunks whose digests differ through
the replica's iSCSI disk (`copy_spans` steps, remirror.agent.seed), and the
replica hashes them again. All but the first chunk, the file system's
superblock: the create's own request copies it, right before `md_create`, so
that until then the replica's disk shows no file system to the primary's
host (and a failure on the way leaves it so: apply again).

The primary's disk must not change meanwhile (a write after its chunk was
hashed would be on one leg only): its write and discard counters are read
before the first hash and after the last copy, and the create's guards
(`device_unwritten`) check every leg's against them right before it: any
write between fails the apply with nothing made. The replica's disk is
written by nothing but the primary's copy: its site exports it to the
primary's initiator alone (what its own host writes to it without opening
it exclusively is beyond these counters, which the primary reads).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from remirror.controller import ApplyError, Outcome
from remirror.errors import RemirrorError
from remirror.facts.parsers import parse_block_stat
from remirror.facts.seed import CHUNK
from remirror.plan.actions import Action
from remirror.plan.seed import SLOWEST_LINK, CatchUpSeed, Counters
from remirror.protocol.steps import ByteRange, CopySpans

if TYPE_CHECKING:
    from remirror.agent.client import AgentClient
    from remirror.controller import Controller

HASH_BATCH = 256  # chunks per digest request: 256 MiB read per answer
COPY_BYTES = 64 * CHUNK  # per copy_spans step: a step's answer comes back within minutes
DIGEST = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True)
class CaughtUp:
    """What a catch-up compared and copied, and the write counters it leaves for the create's
    guards: the primary leg's before anything was hashed, the replica's after the last copy."""

    chunks: int
    differing: int
    copied: int  # bytes
    source: Counters
    target: Counters

    def describe(self) -> str:
        return (
            f"{self.differing} of {self.chunks} chunks differed from the seed:"
            f" {self.copied / CHUNK:.0f} MiB copied"
        )


def carry_out(
    controller: Controller, action: Action, say: Callable[[str], None], done: tuple[Outcome, ...]
) -> Outcome:
    """The plan's CatchUpSeed action, where `Controller.apply` would send a site its steps; what
    it measured goes to the create's guards (`Controller.counters`)."""
    step = next(s for s in action.steps if isinstance(s, CatchUpSeed))
    try:
        caught = catch_up(controller, action.site, step, controller.counters.get(step.source))
    except RemirrorError as error:
        why = error.one_line()
        failed = Outcome(action, False, why)
        raise ApplyError(f"{action.site}: {action.verb} {action.subject}: {why}", (*done, failed)) from None
    controller.counters.setdefault(step.source, caught.source)
    controller.counters[step.target] = caught.target
    say(f"done: {action.line()}: {caught.describe()}")
    return Outcome(action, True)


def catch_up(controller: Controller, site: str, step: CatchUpSeed, since: Counters | None = None) -> CaughtUp:
    """Bring `step.replica_site`'s seed up to date with `site`'s (the primary's) leg; `since`: the
    primary leg's counters an earlier replica's catch-up began from, which must not have moved."""
    chunks = [ByteRange(at, min(CHUNK, step.size - at)) for at in range(0, step.size, CHUNK)]
    primary, replica = controller.clients[site], controller.clients[step.replica_site]
    began = _counters(primary, step.source)
    if since is not None and began != since:
        raise _written(site, step.source)
    ours: dict[int, str] = {}  # the primary's digest of each chunk that differs
    with ThreadPoolExecutor(max_workers=2) as pool:  # both sites read their disk at once
        for start in range(0, len(chunks), HASH_BATCH):
            batch = chunks[start : start + HASH_BATCH]
            mine = pool.submit(_hash, primary, step.source, batch)
            theirs = pool.submit(_hash, replica, step.replica_device, batch)
            for index, (a, b) in enumerate(zip(mine.result(), theirs.result(), strict=True), start):
                if a != b:
                    ours[index] = a
    # Not the first chunk: it holds the file system's superblock, which an import leaves out so
    # that the replica's disk shows no file system; the create's own request copies it
    # (remirror.plan.md_create), after its guards.
    order = sorted(i for i in ours if i != 0)
    for group in _groups([chunks[i] for i in order]):
        copy = CopySpans(
            step.mirror, step.source, step.target, group, 60 + sum(r.length for r in group) / SLOWEST_LINK
        )
        (result,) = primary.run([copy.as_dict()]) or [{"ok": False, "error": "not run"}]
        if not result["ok"]:
            raise RemirrorError(f"{site}: copying onto {step.target}: {result['error']}")
    if _hash(replica, step.replica_device, [chunks[i] for i in order]) != [ours[i] for i in order]:
        raise RemirrorError(f"{step.replica_site}: {step.replica_device} does not hold what was copied")
    if _counters(primary, step.source) != began:
        raise _written(site, step.source)
    copied = sum(chunks[i].length for i in ours)  # the first chunk's with the create
    return CaughtUp(len(chunks), len(ours), copied, began, _counters(primary, step.target))


def _written(site: str, device: str) -> RemirrorError:
    return RemirrorError(
        f"{site}: {device} was written during the catch-up: nothing may use it until apply has made"
        " the mirror; apply again"
    )


def _hash(client: AgentClient, disk: str, chunks: list[ByteRange]) -> list[str]:
    """Each chunk's digest, as the site read it from its disk; an answer that is not that is an
    error, never a difference."""
    found: list[str] = []
    for start in range(0, len(chunks), HASH_BATCH):
        spans = [(r.offset, r.length) for r in chunks[start : start + HASH_BATCH]]
        answer = client.digests(disk, spans, raw=True)
        whole = isinstance(answer, list) and len(answer) == len(spans)
        if not whole or not all(isinstance(d, str) and DIGEST.fullmatch(d) for d in answer):
            raise RemirrorError(f"{client.name}: answered other than a digest per chunk of {disk}")
        found += answer
    return found


def _counters(client: AgentClient, device: str) -> Counters:
    """Sectors written to and discarded from `device` since boot (its /sys/class/block stat)."""
    stat = client.request({"op": "block_stats", "devices": [device]})["stats"].get(device)
    if not isinstance(stat, str):
        raise RemirrorError(f"{client.name}: {device} does not exist")
    try:
        counters = parse_block_stat(stat)
    except ValueError as error:
        raise RemirrorError(f"{client.name}: {device}: {error}") from None
    return counters.sectors_written, counters.sectors_discarded


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
