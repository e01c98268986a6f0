"""The controller: one agent client per site of a profile, through which every command reaches
the sites. It observes them (holding their locks for a command that changes them), plans, and
runs a plan's actions on the sites they belong to."""

from __future__ import annotations

import logging
import stat
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from secrets import token_urlsafe
from typing import Any, Literal

from remirror.agent import lock
from remirror.agent.client import AgentClient
from remirror.agent.lock import SITE_LOCK, holder, operator_wait
from remirror.errors import RemirrorError, SiteUnreachable, UsageError
from remirror.facts.site import SiteFacts, site_facts
from remirror.files import write_private_once
from remirror.plan import Action, Plan, make_plan, make_teardown
from remirror.plan.cdp import volume_path
from remirror.plan.distinct import refuse_names_for_the_same_thing
from remirror.plan.seed import CatchUpSeed, Counters, measured
from remirror.plan.start import make_start, promoted_elsewhere
from remirror.profile.model import Mirror, Profile
from remirror.profile.names import cache_name, points_volume, replica_path
from remirror.profile.wireguard import replica_portal
from remirror.roles import as_run, profile_as_run, running_primaries

log = logging.getLogger("remirror.controller")
MIN_SECRET, MAX_SECRET = 12, 255  # CHAP: RFC 3720 wants 96 bits at least; LIO takes 255


def _every_way_run(mirror: Mirror) -> list[Mirror]:
    """The mirror run by its home primary, then by each replica site (after a promotion)."""
    return [mirror, *(as_run(mirror, r.site) for r in mirror.replicas)]


def _carried_out_here(action: Action) -> bool:
    """An action of the controller's own (a seed's catch-up), not sent to a site as steps."""
    return any(isinstance(step, CatchUpSeed) for step in action.steps)


class ApplyError(RemirrorError):
    """An action failed; nothing after it ran. `outcomes`: the actions that ran, the failed one last."""

    def __init__(self, message: str, outcomes: tuple[Outcome, ...] = ()) -> None:
        super().__init__(message)
        self.outcomes = outcomes


@dataclass(frozen=True)
class Outcome:
    """What happened to one action."""

    action: Action
    ok: bool
    error: str = ""


# What `plan` puts where a secret `apply` would generate is not there yet: plan changes nothing,
# and shows secrets only as digests.
STAND_IN_SECRET = "generated-by-apply"  # noqa: S105 - a placeholder, never a secret


def read_secrets(profile: Profile, generated: Literal["make", "stand-in"] = "make") -> dict[str, str]:
    """Every CHAP secret the profile names, read here on the controller and checked.

    The secrets remirror generates (Profile.replica_chap: a mirror whose profile gives no CHAP)
    are made where missing (`make`), or, for plan, which changes nothing, stood in for by
    STAND_IN_SECRET. One controller sets both ends of a session (the target's ACL, the
    initiator's node record), so a secret made anew reaches both: the new primary after a
    promotion makes its own.
    """
    secrets: dict[str, str] = {}
    for index, mirror in enumerate(profile.mirrors):
        made = mirror.iscsi.chap is None  # Profile.replica_chap generates it
        for where, chap in (
            ("iscsi", profile.replica_chap(mirror)),
            ("export", mirror.export.chap if mirror.export else None),
        ):
            if chap is None:
                continue
            files = [("password_file", chap.password_file)]
            if chap.mutual:
                files.append(("mutual_password_file", chap.target_password_file))
            for key, path in files:
                if made and where == "iscsi":
                    if generated == "stand-in" and not Path(path).exists():
                        secrets[path] = STAND_IN_SECRET
                        continue
                    write_private_once(path, lambda: token_urlsafe(24) + "\n")  # 32 characters
                    location = f"{profile.where('mirrors', index)}: mirror {mirror.name}'s generated CHAP"
                else:
                    location = profile.where("mirrors", index, where, "chap", key)
                secrets[path] = _read_secret(path, location)
    return secrets


def _read_secret(path: str, where: str) -> str:
    file = Path(path)
    try:
        mode = file.stat().st_mode
        text = file.read_text()
    except OSError as error:
        raise RemirrorError(f"{where}: cannot read secret file {path}: {error.strerror}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise RemirrorError(
            f"{where}: secret file {path} is readable by others (mode {mode & 0o777:o}): chmod 600 it"
        )
    secret = text.strip("\n")
    if not MIN_SECRET <= len(secret) <= MAX_SECRET or any(c.isspace() for c in secret):
        raise RemirrorError(
            f"{where}: the secret in {path} must be {MIN_SECRET} to {MAX_SECRET} characters without spaces"
        )
    return secret


# How long a verb an operator runs waits for another's lock on a site (a reconcile pass, a
# watch's pass: seconds to a minute in the lab) before it says who holds it and gives up;
# REMIRROR_LOCK_WAIT (seconds) changes it.
LOCK_WAIT = 90.0


def _raise(error: Exception) -> SiteFacts:
    raise error


class Controller:
    """Holds one agent client per site of a profile.

    `lock`: the verb, for a controller that changes sites. Each site's lock
    (remirror.agent.lock) is then taken before the site is first observed
    and held until `close`, so that what was observed is still so when the
    plan made of it runs: no other remirror changes the site in between.
    """

    def __init__(self, profile: Profile, lock: str = "") -> None:
        self.profile = profile
        self.clients = {name: AgentClient(name, site) for name, site in profile.sites.items()}
        self.unreachable: dict[str, str] = {}  # site -> why the last observe_reachable could not reach it
        self.counters: dict[str, Counters] = {}  # a device's writes, as a seed's catch-up measured them
        self._lock, self._lock_wait = lock, operator_wait(LOCK_WAIT)

    @contextmanager
    def locked(self, verb: str, wait: float) -> Iterator[None]:
        """Lock every site this controller observes in the block, and let go after it (a pass of
        the reconciler, whose controller lives on between passes)."""
        self._lock, self._lock_wait = verb, wait
        try:
            yield
        finally:
            self._lock = ""
            for client in self.clients.values():
                client.unlock(SITE_LOCK)

    def disks_by_site(self) -> dict[str, list[str]]:
        """The devices to observe on each site: the profile's disks and what remirror made of them,
        for every site that may run a mirror (a promotion moves it: docs/failover.md)."""
        disks: dict[str, list[str]] = {name: [] for name in self.profile.sites}
        for home in self.profile.mirrors:
            for mirror in _every_way_run(home):
                for leg in mirror.legs:
                    disks[leg.site] += [leg.disk, f"/dev/mapper/{cache_name(mirror, leg.site)}"]
                    if leg.cache is not None:
                        disks[leg.site].append(leg.cache.disk)
                    if leg.points is not None:  # the leg is the volume over the site's own points
                        disks[leg.site].append(points_volume(mirror, leg.site))
                    # The cache device also without a cache in the profile: one may be there to drain.
                disks[mirror.primary.site].append(mirror.md_device)
                if mirror.cdp is not None:
                    disks[mirror.primary.site].append(volume_path(mirror))  # in use? (destroy, export)
                # The replica disks as the primary sees them: their superblocks
                # tell whether a returning leg took writes of its own.
                disks[mirror.primary.site] += [replica_path(self.profile, mirror, r) for r in mirror.replicas]
        return {site: list(dict.fromkeys(paths)) for site, paths in disks.items()}

    def probes_by_site(self) -> dict[str, list[str]]:
        """The disks whose first 4 KiB each site reads: those the profile makes caches of, mirrors
        with CDP (their index of points starts there) wherever they may run, and primary disks
        whose file system `keep_data` keeps (how far it reaches)."""
        probes: dict[str, list[str]] = {name: [] for name in self.profile.sites}
        for mirror in self.profile.mirrors:
            if mirror.primary.keep_data:  # the disk, and the cache device in front of it if any
                home = mirror.primary
                probes[home.site] += [home.disk, f"/dev/mapper/{cache_name(mirror, home.site)}"]
            for leg in mirror.legs:
                if leg.cache is not None:
                    probes[leg.site].append(leg.cache.disk)
                if leg.points is not None:  # the index of the site's own points starts there
                    probes[leg.site].append(leg.disk)
                if mirror.cdp is not None:
                    probes[leg.site].append(mirror.md_device)
        return probes

    def records_by_site(self) -> dict[str, list[str]]:
        """The devices whose leg record each site reads: its own legs, through the cache device
        when there is one (remirror.roles.leg_records picks)."""
        records: dict[str, list[str]] = {name: [] for name in self.profile.sites}
        for mirror in self.profile.mirrors:
            for leg in mirror.legs:
                records[leg.site] += [leg.disk, f"/dev/mapper/{cache_name(mirror, leg.site)}"]
                if leg.points is not None:
                    records[leg.site].append(points_volume(mirror, leg.site))
        return records

    def running(self, facts: Mapping[str, SiteFacts | None]) -> Profile:
        """The profile with each mirror run by the site its legs' generations name (docs/failover.md)."""
        return profile_as_run(self.profile, running_primaries(self.profile, facts))

    def portals_by_site(self) -> dict[str, list[str]]:
        """The replica portals each primary site logs in to: observing times a handshake with each."""
        portals: dict[str, list[str]] = {name: [] for name in self.profile.sites}
        for mirror in self.profile.mirrors:
            portals[mirror.primary.site] += [
                str(replica_portal(self.profile, mirror, r)) for r in mirror.replicas
            ]
        return portals

    def observe(self) -> dict[str, SiteFacts]:
        """Facts of every site (remote ones first: an unreachable site fails before anything else)."""
        facts = {name: result.result() for name, result in self._observe_all().items()}
        refuse_names_for_the_same_thing(self.profile, facts)
        return facts

    def observe_reachable(self) -> dict[str, SiteFacts | None]:
        """Facts of every site that can be reached; None for the others (the reconciler waits for
        them), and why each could not be reached in `unreachable`."""
        facts: dict[str, SiteFacts | None] = {}
        self.unreachable = {}
        for name, result in self._observe_all().items():
            try:
                facts[name] = result.result()
            except SiteUnreachable as error:
                log.info("%s", error.one_line())
                facts[name] = None
                self.unreachable[name] = error.one_line()
        refuse_names_for_the_same_thing(self.profile, facts)
        return facts

    def observe_site(self, name: str) -> SiteFacts:
        """One site's facts (its lock taken first when this controller locks)."""
        client = self.clients[name]
        if self._lock:
            client.lock(SITE_LOCK, holder(self._lock), self._lock_wait)
        raw = client.observe(
            self.disks_by_site()[name],
            self.portals_by_site()[name],
            self.probes_by_site()[name],
            self.records_by_site()[name],
        )
        return site_facts(name, raw)

    def _observe_all(self) -> dict[str, Future[SiteFacts]]:
        order = sorted(self.profile.sites, key=lambda name: self.profile.sites[name].is_local)
        cut_off = self._lock_in_order() if self._lock else {}
        # All at once: observing is read-only, and each remote site costs an SSH round trip and
        # a Python start there (paid in the locks' order first, one by one, when this locks).
        with ThreadPoolExecutor(max_workers=len(order)) as pool:
            return {
                name: pool.submit(_raise, cut_off[name])
                if name in cut_off
                else pool.submit(self.observe_site, name)
                for name in order
            }

    def _lock_in_order(self) -> dict[str, SiteUnreachable]:
        """Take the sites' locks one by one, in the order of their names, the same at every
        controller: two that start at once (both sites booting, each running its start) never
        each hold one site's lock while waiting for the other's (they did, for LOCK_WAIT, in the
        hosts' lab). The sites that could not be reached, for observe_reachable."""
        cut_off: dict[str, SiteUnreachable] = {}
        for name in sorted(self.profile.sites):
            try:
                self.clients[name].lock(SITE_LOCK, holder(self._lock), self._lock_wait)
            except SiteUnreachable as error:
                cut_off[name] = error
        return cut_off

    def plan(self, secrets: dict[str, str]) -> Plan:
        """Observe and plan, each mirror as it runs now."""
        facts = self.observe()
        return make_plan(self.running(facts), facts, secrets)

    def start(self, secrets: dict[str, str]) -> Plan:
        """Observe and plan what a boot may do: start the mirrors that were running (plan/start.py)."""
        facts = self.observe()
        running = self.running(facts)
        plan = make_start(running, facts, secrets, configured=self.profile)
        moved = promoted_elsewhere(self.profile, running)
        return replace(plan, notes=plan.notes + moved) if moved else plan

    def teardown(self, mirror: Mirror) -> Plan:
        """Observe and plan the removal of one mirror, as it runs now."""
        facts = self.observe()
        running = self.running(facts)
        return make_teardown(running, running.mirror(mirror.name), facts)

    def apply(self, plan: Plan, say: Callable[[str], None]) -> list[Outcome]:
        """Run the plan's actions in order, a site's consecutive actions in one agent request."""
        outcomes: list[Outcome] = []
        index = 0
        actions = list(plan.actions)
        while index < len(actions):
            site = actions[index].site
            if _carried_out_here(actions[index]):
                from remirror.catch_up import carry_out  # only a seeded mirror's new array needs it

                outcomes.append(carry_out(self, actions[index], say, tuple(outcomes)))
                index += 1
                continue
            batch = [actions[index]]
            while (
                index + len(batch) < len(actions)
                and actions[index + len(batch)].site == site
                and not _carried_out_here(actions[index + len(batch)])
            ):
                batch.append(actions[index + len(batch)])
            # The agent boundary: typed steps become the JSON objects the agent reads (a guard
            # with what a catch-up measured in this apply: remirror.catch_up).
            steps = [measured(self.counters, step).as_dict() for action in batch for step in action.steps]
            results = self.clients[site].run(steps)
            position = 0
            for action in batch:
                mine = results[position : position + len(action.steps)]
                position += len(action.steps)
                failed = next((r for r in mine if not r["ok"]), None)
                if failed is not None or len(mine) < len(action.steps):
                    error = failed["error"] if failed else "not run"
                    outcomes.append(Outcome(action, False, error))
                    raise ApplyError(
                        f"{action.site}: {action.verb} {action.subject}: {error}", tuple(outcomes)
                    )
                outcomes.append(Outcome(action, True))
                say(f"done: {action.line()}")
            index += len(batch)
        return outcomes

    def cdp(self, site: str, request: dict[str, Any]) -> dict[str, Any]:
        """A `remirror cdp` request (remirror.agent.cdp_requests) to `site`, which must be this host:
        points are taken on the kernel that holds them, never across a WAN, and a leg's own
        points answer no other site (docs/security.md). What writes the index waits for its lock
        as an operator's verb does (REMIRROR_LOCK_WAIT)."""
        from remirror.agent.cdp import INDEX_LOCK_WAIT

        if not self.profile.sites[site].is_local:
            raise UsageError(
                f"cdp: {request['mirror']}'s points are kept on {site}, not this host: run cdp there"
            )
        wait = operator_wait(INDEX_LOCK_WAIT)
        answer = self.clients[site].request({"op": "cdp", "wait": wait, **request})
        if not answer["ok"]:
            raise (UsageError if answer["usage"] else RemirrorError)(answer["message"])
        return answer

    def remote_holds(self) -> list[int]:
        """The agents of other hosts' controllers holding or waiting for this host's site lock (a
        look, for the operator's confirmation before `seize_site_lock`)."""
        from remirror.agent.remote_holders import remote_holders

        return remote_holders(SITE_LOCK)

    def seize_site_lock(self) -> list[str]:
        """A forced promotion, run on the site it promotes, goes first: it marks the site (nobody
        else takes its lock meanwhile) and ends every agent of another host's controller that
        holds or waits for the site's lock (remirror.agent.remote_holders), whether cut off with
        its link or holding it on purpose. The site's own verbs are waited for as ever. What it
        ended, for the operator."""
        from remirror.agent.remote_holders import end_remote_holders

        lock.take(lock.FORCED_LOCK, holder("promote --force"), self._lock_wait)
        return end_remote_holders(SITE_LOCK)

    def close(self) -> None:
        """Close every connection; log what the command cost each site (with -v)."""
        lock.release(lock.FORCED_LOCK)
        for client in self.clients.values():
            client.close()
            if client.requests:
                log.info(
                    "site %s: %d agent requests, %d commands run, %d bytes of answers",
                    client.name, client.requests, client.commands_run, client.bytes_received,
                )  # fmt: skip
