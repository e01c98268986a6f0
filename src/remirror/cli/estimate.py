"""`remirror estimate`: what each mirror will ask of the link, before (or while) it runs.

Samples the primary's writes over a window (the mirror device when it runs,
else the primary disk the applications write to now), measures the link to
each replica's site (or takes `--link`), and predicts with
remirror.plan.estimate: the initial sync, the resync after an outage, async
mode's backlog and whether sync mode fits.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import click

from remirror.cli.output import emit_json, output_option, profile_argument
from remirror.errors import UsageError

if TYPE_CHECKING:
    from remirror.controller import Controller
    from remirror.facts.site import SiteFacts
    from remirror.plan.estimate import Estimate, Sample
    from remirror.profile.model import Mirror

# What a timed transfer to the replica's site sends: enough to outlast the round trip and
# TCP's slow start on a WAN, little enough to take seconds on a slow link.
PROBE_BYTES = 8 * 1024 * 1024


@click.command()
@profile_argument
@click.option("--window", default="60s", show_default=True, metavar="DURATION",
              help="How long to sample the primary's writes (make it cover a busy time).")  # fmt: skip
@click.option("--outage", default="1h", show_default=True, metavar="DURATION",
              help="The outage whose resync to estimate.")  # fmt: skip
@click.option("--link", "link", default=None, metavar="RATE",
              help="The link's rate (50Mbit, 1Gbit, 40MiB) instead of measuring it.")  # fmt: skip
@output_option
def estimate(profile_path: str, window: str, outage: str, link: str | None, output: str) -> int:
    """Predict the initial sync, a resync after an outage, async mode's backlog and whether sync
    mode fits the link, from the primary's own writes and the measured link.

    Run it on the primary site (the link is measured from here).
    """
    from remirror.controller import Controller
    from remirror.here import load_profile_here
    from remirror.units import parse_duration, parse_rate

    try:
        window_s, outage_s = parse_duration(window), parse_duration(outage)
        link_rate = parse_rate(link) if link is not None else None
    except ValueError as error:
        raise UsageError(f"estimate: {error}") from None
    if window_s < 2:
        raise UsageError("estimate: --window must be 2s or more (two samples at least)")
    profile = load_profile_here(profile_path)
    controller = Controller(profile)
    try:
        facts = controller.observe()
        devices = {m.name: _sampled_device(m, facts[m.primary.site]) for m in profile.mirrors}
        links = {m.name: _link(controller, m, facts, link_rate) for m in profile.mirrors}
        samples = _sample(controller, profile.mirrors, devices, window_s)
    finally:
        controller.close()
    found = [_estimate(m, facts, samples[m.name], links[m.name], outage_s) for m in profile.mirrors]
    if output == "json":
        emit_json("estimate", {"mirrors": [_as_json(e, devices[e.mirror]) for e in found]})
    else:
        for e in found:
            click.echo("\n".join(_lines(e, devices[e.mirror])))
    return 0


def _sampled_device(mirror: Mirror, primary: SiteFacts) -> str:
    """The device the applications write to: the mirror when it runs, else the primary disk."""
    md = primary.disks.get(mirror.md_device)
    return mirror.md_device if md is not None and md.exists else mirror.primary.disk


def _link(
    controller: Controller, mirror: Mirror, facts: dict[str, SiteFacts], given: float | None
) -> tuple[float, bool, float | None]:
    """(rate in bytes/s, measured, round trip in s) toward the mirror's first replica."""
    from remirror.profile.wireguard import replica_portal

    replica = mirror.replicas[0]
    portal = replica_portal(controller.profile, mirror, replica)
    rtt = facts[mirror.primary.site].portal_rtt.get(str(portal))
    if given is not None:
        return given, False, rtt
    sites = controller.profile.sites
    if not sites[mirror.primary.site].is_local or sites[replica.site].is_local:
        raise UsageError(
            f"estimate: mirror {mirror.name}: the link from {mirror.primary.site} to {replica.site} is"
            " measured from the primary site, with the replica's site remote: run it there, or give --link"
        )
    client = controller.clients[replica.site]
    client.request({"op": "sink", "data": ""})  # the agent is up: only the transfer is timed
    started = time.monotonic()
    client.request({"op": "sink", "data": "x" * PROBE_BYTES})
    elapsed = time.monotonic() - started
    # The request's last byte leaves a round trip before its answer is back.
    return PROBE_BYTES / max(elapsed - (rtt or 0.0), 1e-6), True, rtt


def _sample(
    controller: Controller, mirrors: list[Mirror], devices: dict[str, str], window: float
) -> dict[str, list[Sample]]:
    """Each mirror's write counters every few seconds over `window` (30 samples or more)."""
    from remirror.facts.parsers import parse_block_stat
    from remirror.plan.estimate import Sample

    every = min(10.0, max(1.0, window / 30))
    wanted: dict[str, list[str]] = {}
    for m in mirrors:
        wanted.setdefault(m.primary.site, []).append(devices[m.name])
    samples: dict[str, list[Sample]] = {m.name: [] for m in mirrors}
    end = time.monotonic() + window
    while True:
        now = time.monotonic()
        for site, paths in wanted.items():
            stats = controller.clients[site].request({"op": "block_stats", "devices": paths})["stats"]
            for m in (m for m in mirrors if m.primary.site == site):
                line = stats.get(devices[m.name])
                if line is None:
                    raise UsageError(f"estimate: site {site}: {devices[m.name]} does not exist")
                counters = parse_block_stat(line)
                samples[m.name].append(Sample(now, counters.writes, counters.sectors_written))
        if now >= end:
            return samples
        time.sleep(max(0.0, min(every, end - time.monotonic())))


def _estimate(
    mirror: Mirror,
    facts: dict[str, SiteFacts],
    samples: list[Sample],
    link: tuple[float, bool, float | None],
    outage: float,
) -> Estimate:
    from remirror.plan.estimate import Estimate, write_load

    disk = facts[mirror.primary.site].disks.get(mirror.primary.disk)
    rate, measured, rtt = link
    return Estimate(
        mirror=mirror.name,
        mode=mirror.replication.mode,
        disk_bytes=disk.size if disk is not None else 0,
        load=write_load(samples),
        link_bytes=rate,
        link_measured=measured,
        rtt_seconds=rtt,
        resync_max=mirror.replication.resync_max,
        bitmap_chunk=mirror.replication.bitmap_chunk,
        write_behind=mirror.replication.effective_write_behind,
        outage_seconds=outage,
    )


def _as_json(e: Estimate, device: str) -> dict[str, Any]:
    return {
        "mirror": e.mirror,
        "mode": e.mode,
        "disk_bytes": e.disk_bytes,
        "sampled": device,
        "writes": {
            "window_seconds": e.load.seconds,
            "mean_bytes_per_second": e.load.mean_bytes,
            "peak_bytes_per_second": e.load.peak_bytes,
            "mean_writes_per_second": e.load.mean_writes,
            "peak_writes_per_second": e.load.peak_writes,
        },
        "link": {"bytes_per_second": e.link_bytes, "measured": e.link_measured, "rtt_seconds": e.rtt_seconds},
        "resync_max_bytes_per_second": e.resync_max,
        "sync_rate_bytes_per_second": e.sync_rate,
        "initial_sync_seconds": e.initial_sync_seconds,
        "outage": {
            "seconds": e.outage_seconds,
            "dirty_bytes": e.outage_dirty_bytes,
            "resync_seconds": e.resync_seconds,
        },
        "async": {
            "peak_excess_bytes_per_second": e.peak_excess_bytes,
            "write_behind_full_seconds": e.write_behind_full_seconds,
        },
        "sync": {"fits": e.sync_fits, "write_delay_seconds": e.sync_write_delay_seconds},
    }


def _lines(e: Estimate, device: str) -> list[str]:
    from remirror.units import format_approx, format_bits, format_duration

    def rate(value: float) -> str:
        return f"{format_approx(value)}/s"

    def how_long(seconds: float | None) -> str:
        if seconds is None:
            return "never"
        # An estimate in round figures: 4d10h, 2h35m, 46m, 3m20s.
        step = next((unit for big, unit in ((86400, 3600), (600, 60)) if seconds >= big), 1)
        return f"about {format_duration(round(seconds / step) * step)}"

    load = e.load
    source = "measured" if e.link_measured else "given"
    rtt = f", round trip {format_duration(e.rtt_seconds)}" if e.rtt_seconds is not None else ""
    limit = f", resync_max {rate(e.resync_max)}" if e.resync_max is not None else ""
    lines = [
        f"{e.mirror} ({e.mode}, {format_approx(e.disk_bytes)}): {device} writes {rate(load.mean_bytes)}"
        f" on average, {rate(load.peak_bytes)} at its busiest, over {format_duration(load.seconds)}",
        f"  link: {format_bits(e.link_bytes)} ({source}){rtt}{limit}",
        f"  initial sync: {how_long(e.initial_sync_seconds)} ({format_approx(e.disk_bytes)} at"
        f" {rate(e.sync_rate)}: the link less the primary's writes"
        + (", and no more than resync_max)" if e.resync_max is not None else ")"),
        f"  after a {format_duration(e.outage_seconds)} outage: {format_approx(e.outage_dirty_bytes)} to"
        f" resync, {how_long(e.resync_seconds)} (more if the writes are scattered, less if they rewrite"
        " the same places)",
    ]
    if e.sync_fits:
        delay = e.sync_write_delay_seconds
        wait = f"; each write waits at least {format_duration(delay)} more" if delay is not None else ""
        lines.append(f"  sync mode: fits (the busiest writes take {rate(load.peak_bytes)} of the link){wait}")
    else:
        lines.append(
            f"  sync mode: does not fit: the busiest writes ({rate(load.peak_bytes)}) outrun the link;"
            " writes would slow to its pace"
        )
    full = e.write_behind_full_seconds
    if full is None:
        lines.append("  async mode: keeps up at the busiest")
    else:
        lines.append(
            f"  async mode: the busiest pace outruns the link by {rate(e.peak_excess_bytes)}; write-behind"
            f" ({e.write_behind} writes) fills in {how_long(full)}, then writes wait for the link"
        )
    return lines
