"""The I/O side of health: observe the sites, date the replicas, report.

`status`, `check` and `metrics` call `snapshot`; the reconciler calls
`record_in_sync` after each pass. Both keep the small state file that dates
the replicas (when each was last seen in sync): RPO needs a memory, and md
keeps none of when a leg fell behind. `verify` compares the legs by digests.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from remirror.controller import Controller
from remirror.errors import RemirrorError, UsageError
from remirror.facts.site import SiteFacts
from remirror.files import state_dir, write_atomically
from remirror.health import MirrorHealth, State, assess
from remirror.health.report import MirrorReport, report
from remirror.health.seen import Seen
from remirror.health.verify import Span, VerifyRecord, batch_chunks, differing, merged, pause_for, settle
from remirror.profile.model import Profile
from remirror.profile.names import leg_device

log = logging.getLogger("remirror.monitor")


def state_file(profile: Profile) -> Path:
    """Where this profile's replicas are dated: $REMIRROR_STATE_DIR or /var/lib/remirror."""
    return state_dir() / f"{profile.name}.seen.json"


def load_seen(profile: Profile) -> Seen:
    """What the state file holds; nothing when it is missing or unreadable (RPO becomes unknown)."""
    try:
        data = json.loads(state_file(profile).read_text())
        in_sync = {m: {s: float(t) for s, t in sites.items()} for m, sites in data["in_sync_at"].items()}
    except FileNotFoundError:
        return Seen({})
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        log.warning("ignoring %s: %s", state_file(profile), error)
        return Seen({})
    try:
        readds = {
            m: {s: (int(count), float(last)) for s, (count, last) in sites.items()}
            for m, sites in data.get("readds", {}).items()
        }
    except (ValueError, TypeError, AttributeError) as error:  # the dates still count
        log.warning("ignoring the re-adds in %s: %s", state_file(profile), error)
        readds = {}
    return Seen(in_sync, readds)


def save_seen(profile: Profile, seen: Seen) -> None:
    """Write the state file; a monitoring command without write access still answers."""
    document = {
        "in_sync_at": {m: dict(sites) for m, sites in seen.in_sync_at.items()},
        "readds": {m: {s: list(entry) for s, entry in sites.items()} for m, sites in seen.readds.items()},
    }
    try:
        write_atomically(state_file(profile), json.dumps(document, indent=1, sort_keys=True) + "\n", 0o644)
    except OSError as error:
        log.warning("cannot record when replicas were in sync in %s: %s", state_file(profile), error)


def record_in_sync(
    profile: Profile, healths: list[MirrorHealth], readded: Sequence[tuple[str, str]] = ()
) -> Seen:
    """Count the reconciler's re-adds (`readded`: mirror, site), then date every replica leg in
    sync now (forgetting its re-adds); the updated record."""
    with _held_file(profile):  # a pass and a `status` beside it: neither loses the other's
        before = load_seen(profile)
        now = time.time()
        seen = before
        for mirror, site in readded:
            seen = seen.readded(mirror, site, now)
        seen = seen.updated(healths, now)
        if seen != before:
            save_seen(profile, seen)
        return seen


@contextlib.contextmanager
def _held_file(profile: Profile) -> Iterator[None]:
    """An flock beside the state file while it is read and written again; none where it cannot be
    taken (a command without write access there still answers)."""
    try:
        state_file(profile).parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(f"{state_file(profile)}.lock", os.O_CREAT | os.O_RDWR, 0o644)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def snapshot(controller: Controller) -> tuple[list[MirrorReport], dict[str, SiteFacts | None]]:
    """Observe every reachable site once; the mirrors' reports (with each one's last verify from
    this host), and the facts they came from."""
    facts = controller.observe_reachable()
    profile = controller.running(facts)
    healths = [assess(profile, mirror, facts) for mirror in profile.mirrors]
    seen = record_in_sync(profile, healths)
    reports = report(profile, facts, seen, time.time())
    return [dataclasses.replace(r, verify=last_verify(profile, r.mirror)) for r in reports], facts


def verify_file(profile: Profile, mirror: str) -> Path:
    """Where this host keeps a mirror's last verify: beside the state file."""
    return state_dir() / f"{profile.name}.{mirror}.verify.json"


def record_verify(profile: Profile, record: VerifyRecord) -> None:
    """Keep a verify's outcome for `check`, `status` and `metrics` (0644: no secret in it). A
    difference found stays until a verify finds the legs match: one that could not tell (the
    mirror resyncing when the timer came) repaired nothing."""
    kept = last_verify(profile, record.mirror)
    if kept is not None and kept.result == "differ" and record.result != "match":
        return
    text = json.dumps(record.as_json(), indent=1, sort_keys=True) + "\n"
    try:
        write_atomically(verify_file(profile, record.mirror), text, 0o644)
    except OSError as error:  # the verify's answer stands; only its memory is lost
        log.warning("could not keep the verify of %s: %s", record.mirror, error)


def forget_verify(profile: Profile, mirror: str) -> None:
    """The mirror is gone (`destroy`): one built again under its name starts with no verify."""
    with contextlib.suppress(OSError):
        verify_file(profile, mirror).unlink(missing_ok=True)


def last_verify(profile: Profile, mirror: str) -> VerifyRecord | None:
    """The mirror's last verify from this host, if one was kept and reads."""
    try:
        return VerifyRecord.from_json(json.loads(verify_file(profile, mirror).read_text()))
    except (OSError, ValueError):
        return None


# --- verify: compare the legs by digests -----------------------------------

PAUSES = (1.0, 3.0, 10.0)  # seconds before each re-check of chunks that differed


@dataclass(frozen=True)
class Verification:
    """What `remirror verify` found."""

    mirror: str
    span: Span
    chunk: int
    legs: tuple[str, ...]  # sites, the primary first
    mismatched: tuple[Span, ...]
    busy: tuple[Span, ...]  # written during the check: not verified
    bytes_received: dict[str, int]  # what each remote site's answers took on the link


def verify(
    controller: Controller,
    mirror_name: str,
    span: Span | None,
    chunk: int,
    pauses: tuple[float, ...] = PAUSES,
    rate: float | None = None,
    progress: Callable[[int, int], None] = lambda done, total: None,
) -> Verification:
    """Hash every leg of a MIRRORED mirror on its own site and compare; re-check what differs.

    `rate`: bytes per second each site reads of its leg, on average (None: as fast as it can);
    `progress(done, total)`: bytes compared so far (the slowest leg's) after each request."""
    profile = controller.profile
    mirror = next((m for m in profile.mirrors if m.name == mirror_name), None)
    if mirror is None:
        names = ", ".join(m.name for m in profile.mirrors)
        raise UsageError(f"no mirror {mirror_name!r} in profile {profile.name!r} (it has: {names})")
    facts = controller.observe()
    profile = controller.running(facts)  # the primary may have moved (failover)
    mirror = profile.mirror(mirror.name)
    health = assess(profile, mirror, dict(facts))
    if health.state is not State.MIRRORED:
        raise RemirrorError(f"{mirror.name} is {health.state}: {health.reason}: verify compares legs in sync")
    device = facts[mirror.primary.site].disks.get(mirror.md_device)
    size = device.size if device is not None else 0
    try:
        span = (span or Span(0, size)).checked(size, chunk)
    except ValueError as error:
        raise UsageError(f"verify {mirror.name}: {error}") from None
    # Through the caches, if any: a writecache holds writes its disk does not have yet.
    every = mirror.legs
    legs = {leg.site: leg_device(mirror, leg, facts[leg.site].dm) for leg in every}
    chunks = span.chunks(chunk)
    before = {site: controller.clients[site].bytes_received for site in legs}

    step = batch_chunks(chunk, rate)
    read = dict.fromkeys(legs, 0)  # bytes each leg has hashed in the first round: the progress

    def hash_all(indexes: list[int], first: bool = False) -> dict[str, dict[int, str]]:
        def one_leg(site: str) -> dict[int, str]:
            found: dict[int, str] = {}
            started, done = time.monotonic(), 0
            for start in range(0, len(indexes), step):
                batch = indexes[start : start + step]
                spans = [(chunks[i].offset, chunks[i].length) for i in batch]
                found.update(zip(batch, controller.clients[site].digests(legs[site], spans), strict=True))
                done += sum(length for _, length in spans)
                if first:  # the re-checks of what differed are not the comparison's progress
                    read[site] = done
                    progress(min(read.values()), span.length)
                time.sleep(pause_for(rate, done, time.monotonic() - started))
            return found

        with ThreadPoolExecutor(max_workers=len(legs)) as pool:  # every site hashes at once
            futures = {site: pool.submit(one_leg, site) for site in legs}
            return {site: future.result() for site, future in futures.items()}

    first = hash_all(list(range(len(chunks))), first=True)
    suspects = differing({site: [digests[i] for i in range(len(chunks))] for site, digests in first.items()})
    rounds = [{site: {i: digests[i] for i in suspects} for site, digests in first.items()}]
    for pause in pauses:
        if not suspects:
            break
        time.sleep(pause)
        rounds.append(hash_all(suspects))
        # A chunk whose legs agree in any round is settled: re-check only the others.
        suspects = [i for i in suspects if len({r[i] for r in rounds[-1].values()}) > 1]
    settled = settle(mirror.primary.site, rounds)
    return Verification(
        mirror=mirror.name,
        span=span,
        chunk=chunk,
        legs=tuple(legs),
        mismatched=tuple(merged([chunks[i] for i in settled.mismatched])),
        busy=tuple(merged([chunks[i] for i in settled.busy])),
        bytes_received={site: controller.clients[site].bytes_received - before[site] for site in legs},
    )
