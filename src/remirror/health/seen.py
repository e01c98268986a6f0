"""What needs a memory: when each replica leg was last in sync, and the reconciler's re-adds of it.

md keeps no record of when a leg fell behind (RPO needs one), nor of how often
a leg came back only to fail again. Pure: the caller keeps it in a small state
file (remirror.monitor). After READD_TRIES re-adds that did not bring a leg
back in sync (its disk fails every write, its site's points pool is full), the
reconciler leaves it out and tries again every HELD_RETRY: a disk that keeps
failing is reported, not flapped (docs/safety.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from remirror.health.state import IN_SYNC, MirrorHealth

READD_TRIES = 3
HELD_RETRY = 3600.0


@dataclass(frozen=True)
class Seen:
    """When each replica leg was last seen in sync: `{mirror: {site: unix time}}`; and the
    re-adds the reconciler made of it since: `{mirror: {site: (count, unix time of the last)}}`."""

    in_sync_at: Mapping[str, Mapping[str, float]]
    readds: Mapping[str, Mapping[str, tuple[int, float]]] = field(default_factory=dict)

    def last(self, mirror: str, site: str) -> float | None:
        """When this leg was last seen in sync, if ever."""
        return self.in_sync_at.get(mirror, {}).get(site)

    def failed_readds(self, mirror: str, site: str) -> int:
        """Re-adds of this leg since it was last seen in sync."""
        return self.readds.get(mirror, {}).get(site, (0, 0.0))[0]

    def held_until(self, mirror: str, site: str) -> float | None:
        """Until when the reconciler leaves this leg out: READD_TRIES re-adds that did not bring it
        back in sync, then one try every HELD_RETRY; None: it is not held."""
        count, last = self.readds.get(mirror, {}).get(site, (0, 0.0))
        return last + HELD_RETRY if count >= READD_TRIES else None

    def readded(self, mirror: str, site: str, now: float) -> Seen:
        """With one more re-add of this leg, at `now`."""
        table = {m: dict(sites) for m, sites in self.readds.items()}
        count = self.failed_readds(mirror, site)
        table.setdefault(mirror, {})[site] = (count + 1, now)
        return Seen(self.in_sync_at, table)

    def updated(self, healths: list[MirrorHealth], now: float) -> Seen:
        """With every replica leg in sync now recorded at `now`, and its re-adds forgotten; so are
        those of a leg whose link is down: a leg the link failed is not a disk failing writes."""
        table = {mirror: dict(sites) for mirror, sites in self.in_sync_at.items()}
        readds = {mirror: dict(sites) for mirror, sites in self.readds.items()}
        for health in healths:
            for leg in health.legs:
                if leg.role != "replica":
                    continue
                if leg.status == IN_SYNC:
                    table.setdefault(health.mirror, {})[leg.site] = now
                if leg.status == IN_SYNC or leg.session not in ("", "LOGGED_IN"):
                    readds.get(health.mirror, {}).pop(leg.site, None)
        return Seen(table, {mirror: sites for mirror, sites in readds.items() if sites})
