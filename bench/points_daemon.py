"""CDP's daemon (`remirror cdp run`) running while the bench measures, as it runs at a site.

Points taken by the bench itself between jobs are taken with nothing in flight; a site's
daemon takes them on its own schedule, under whatever load the mirror has then: a point's
own cost (dm-era's new era, the thin snapshot, its metadata commit) then falls on the writes
in flight, and the copy-on-write after it on the writes that follow. bench/suite.py runs the
daemon through CDP's judged jobs, each one interval long, and records when each point came
(seconds into the job) and what it took.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from basics import log


class PointsDaemon:
    """`remirror cdp run PROFILE MIRROR` in the background, its JSON lines kept with the time
    (monotonic) each was read."""

    def __init__(self, profile: Path, mirror: str, *, at_site_b: bool = False) -> None:
        """`at_site_b`: the DR site's daemon, in its namespaces with its own view of the profile
        (common.site_b_view), taking the points of its own leg."""
        self.events: list[tuple[float, dict[str, Any]]] = []
        self.other: list[str] = []  # what it printed that is not an event: kept for the record
        self._process = subprocess.Popen(
            [*(["site-b"] if at_site_b else []), "remirror", "cdp", "run", str(profile), mirror],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self._process.stdout or ():
            try:
                self.events.append((time.monotonic(), json.loads(line)))
            except ValueError:
                self.other.append(line.rstrip("\n"))

    def points(self) -> list[tuple[float, dict[str, Any]]]:
        return [(at, event) for at, event in self.events if event.get("event") == "point"]

    def wait_for_point(self, timeout: float) -> None:
        """Until the daemon has taken a point (its first is due as it starts), so that the
        jobs start a known time after one; exits the bench with what it said otherwise."""
        deadline = time.monotonic() + timeout
        while not self.points():
            if self._process.poll() is not None or time.monotonic() > deadline:
                said = [*self.events[-3:], *self.other[-3:]]
                raise SystemExit(f"bench: `remirror cdp run` took no point: {said}")
            time.sleep(0.5)
        log(f"cdp run: first point in {self.points()[0][1]['seconds']:.1f}s")

    def stop(self) -> None:
        self._process.terminate()
        try:
            self._process.wait(timeout=120)  # a point in progress is finished first
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._reader.join(timeout=60)

    def record(self, job_starts: list[float], job_seconds: float) -> dict[str, Any]:
        return record(self.events, self.other, job_starts, job_seconds)


def record(
    events: list[tuple[float, dict[str, Any]]], other: list[str], job_starts: list[float], job_seconds: float
) -> dict[str, Any]:
    """What the daemon did: every point (seconds into the judged job it started in, if any, and
    how long it took), the failures it reported, and the points each job saw."""
    first = job_starts[0] if job_starts else 0.0
    taken = []
    for done_at, event in events:
        if event.get("event") != "point":
            continue
        # Its line comes once the point is taken (and pruning after it): placed by its start.
        at = done_at - float(event.get("seconds") or 0.0)
        job = next((i for i, start in enumerate(job_starts) if start <= at < start + job_seconds), None)
        taken.append({
            "at_s": round(at - first, 1),  # from the first judged job's start
            "job": job,
            "into_job_s": round(at - job_starts[job], 1) if job is not None else None,
            "seconds": event.get("seconds"),
        })  # fmt: skip
    failed = [event for _, event in events if event.get("event") in ("failed", "no_stack")]
    return {
        "points": taken,
        "points_per_job": [sum(p["job"] == i for p in taken) for i in range(len(job_starts))],
        "failures": failed,
        "other_output": other[-5:],
    }
