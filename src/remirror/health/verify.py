"""`remirror verify`: which parts of a mirror's legs differ, from digests. Pure.

Each site hashes its own leg in chunks (the agent's `digest` op) and only
the digests cross the link: 16 bytes per chunk, where md's `check` would
read the whole remote leg over the WAN. A chunk whose digests differ is
hashed again on every leg after a pause, a few times: a write in flight
(write-behind still draining to the replica) settles, a real difference
stays. A chunk the primary itself changed between two looks is being
written: it is reported as busy, never as a mismatch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from remirror.units import parse_size

ALIGN = 4096  # O_DIRECT reads: offsets and lengths in whole pages


@dataclass(frozen=True, order=True)
class Span:
    """A byte range of the mirror device: [offset, offset + length)."""

    offset: int
    length: int

    @property
    def end(self) -> int:
        """One past the last byte."""
        return self.offset + self.length

    @classmethod
    def parse(cls, text: str) -> Span:
        """`OFFSET:LENGTH` in sizes (`100MiB:1MiB`). Raises ValueError."""
        offset, sep, length = text.partition(":")
        if not sep:
            raise ValueError(f"{text!r} is not OFFSET:LENGTH")
        return cls(parse_size(offset), parse_size(length))

    def checked(self, size: int, chunk: int) -> Span:
        """This span, if it is page-aligned and inside a device of `size` bytes; else ValueError."""
        if chunk <= 0 or chunk % ALIGN:
            raise ValueError(f"the chunk must be a multiple of {ALIGN} bytes, not {chunk}")
        if self.offset % ALIGN or self.length % ALIGN or self.length <= 0:
            raise ValueError(f"the range must start and end on {ALIGN}-byte boundaries and not be empty")
        if self.end > size:
            raise ValueError(f"the range ends at byte {self.end}, past the mirror's {size} bytes")
        return self

    def chunks(self, chunk: int) -> list[Span]:
        """This span cut into chunks (the last one may be shorter)."""
        return [Span(at, min(chunk, self.end - at)) for at in range(self.offset, self.end, chunk)]


def differing(digests: Mapping[str, Sequence[str]]) -> list[int]:
    """Indexes of the chunks whose digests are not the same on every leg."""
    columns = list(zip(*digests.values(), strict=True))
    return [index for index, column in enumerate(columns) if len(set(column)) > 1]


def merged(spans: Sequence[Span]) -> list[Span]:
    """Adjacent or overlapping spans joined, in order."""
    joined: list[Span] = []
    for span in sorted(spans):
        if joined and span.offset <= joined[-1].end:
            last = joined.pop()
            span = Span(last.offset, max(last.end, span.end) - last.offset)
        joined.append(span)
    return joined


@dataclass(frozen=True)
class Settled:
    """What the re-checks of suspect chunks concluded."""

    mismatched: tuple[int, ...]  # differ every time, the primary unchanged: real
    busy: tuple[int, ...]  # the primary changed between looks: being written, not verified


def settle(primary: str, rounds: Sequence[Mapping[str, Mapping[int, str]]]) -> Settled:
    """Judge suspect chunks from several rounds of `{leg: {chunk index: digest}}`.

    A chunk is mismatched only if its legs differ in every round while the
    primary's digest stays the same; one round where all legs agree clears it.
    """
    suspects = set(rounds[0][primary]) if rounds else set()
    mismatched, busy = [], []
    for index in sorted(suspects):
        # Later rounds look only at what was still suspect after the one before.
        looks = [{leg: chunks[index] for leg, chunks in r.items()} for r in rounds if index in r[primary]]
        if any(len(set(look.values())) == 1 for look in looks):
            continue  # settled: a write in flight had not reached every leg yet
        if len({look[primary] for look in looks}) > 1:
            busy.append(index)
        else:
            mismatched.append(index)
    return Settled(tuple(mismatched), tuple(busy))


BATCH = 4096  # chunks per agent request: bounds the answer's size and the request's time


def batch_chunks(chunk: int, rate: float | None) -> int:
    """Chunks per digest request: BATCH, or about a second's reading at `rate` (bytes per second
    per leg), so that a paced verify reads in small steps rather than bursts of gigabytes."""
    return BATCH if rate is None else max(1, min(BATCH, int(rate // chunk)))


def pause_for(rate: float | None, done: int, elapsed: float) -> float:
    """Seconds to wait so that `done` bytes read in `elapsed` seconds hold to `rate` on average."""
    return 0.0 if rate is None else max(0.0, done / rate - elapsed)


Result = Literal["match", "differ", "cannot_tell"]
RESULT_CODES: dict[Result, int] = {"match": 0, "differ": 1, "cannot_tell": 2}  # verify's exit codes


@dataclass(frozen=True)
class VerifyRecord:
    """The last `remirror verify` of a mirror from this host: what `check`, `status` and
    `metrics` say of it (a difference found stays CRITICAL until a verify finds none)."""

    mirror: str
    finished: float  # epoch seconds
    seconds: float
    result: Result
    compared_bytes: int
    mismatched_bytes: int
    rate: float | None  # the --rate it was held to, bytes/s per leg

    def as_json(self) -> dict[str, Any]:
        return {
            "mirror": self.mirror,
            "finished": self.finished,
            "seconds": self.seconds,
            "result": self.result,
            "compared_bytes": self.compared_bytes,
            "mismatched_bytes": self.mismatched_bytes,
            "rate": self.rate,
        }

    @classmethod
    def from_json(cls, body: Any) -> VerifyRecord | None:
        """A record as the file holds it; None for one that does not read as one."""
        try:
            result = body["result"]
            if result not in RESULT_CODES:
                return None
            rate = None if body["rate"] is None else float(body["rate"])
            return cls(
                str(body["mirror"]),
                float(body["finished"]),
                float(body["seconds"]),
                result,
                int(body["compared_bytes"]),
                int(body["mismatched_bytes"]),
                rate,
            )
        except (TypeError, KeyError, ValueError):
            return None
