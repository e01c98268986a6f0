"""`remirror lab`: boot a throwaway two-site VM; control its link from inside (or a link of a
host of the hosts' lab, from inside that host)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from remirror.errors import UsageError
from remirror.lab.model import parse_dilation
from remirror.lab.spec import DEFAULT_DISK_SIZE, DEFAULT_DISKS, FAST_DISK_SIZE, LAB_FILE, LabSpec, Wan
from remirror.units import format_size, parse_duration, parse_size


def _boot_options(command: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option(
            "--disk-size",
            default=format_size(DEFAULT_DISK_SIZE),
            show_default=True,
            help="Size of each data disk.",
        ),
        click.option("--disks", default=DEFAULT_DISKS, show_default=True, help="Data disks per site."),
        click.option(
            "--fast-disk-size",
            default=format_size(FAST_DISK_SIZE),
            show_default=True,
            help="Size of each site's cache disk.",
        ),
        click.option(
            "--disk-model",
            type=click.Choice(["hdd"]),
            help="Data disks that queue like 7200 rpm disks, cache disks like SATA SSDs, a 10 Gbit"
            " LAN: docs/performance.md.",
        ),
        click.option(
            "--dilation",
            default="auto",
            show_default=True,
            help="With --disk-model: how many times slower than the modelled hardware the lab runs"
            " (auto: measured at boot against this host).",
        ),
        click.option(
            "--wan", "wan_spec", metavar="SPEC", help="Start with a WAN: 7ms or delay=7ms,rate=45mbit,..."
        ),
        click.option("--memory", default="2G", show_default=True, help="VM memory."),
        click.option(
            "--timeout", default="1h", show_default=True, help="Give up on the whole run after this."
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _spec(
    disk_size: str,
    fast_disk_size: str,
    disks: int,
    disk_model: str | None,
    dilation: str,
    wan_spec: str | None,
    **extra: Any,
) -> LabSpec:
    try:
        wan = Wan.parse(wan_spec) if wan_spec else None
        factor = parse_dilation(dilation)
        return LabSpec(
            disks_per_site=disks,
            disk_size=parse_size(disk_size),
            fast_disk_size=parse_size(fast_disk_size),
            disk_model=disk_model or "",
            dilation=factor,
            wan=wan,
            **extra,
        )
    except ValueError as error:
        raise UsageError(f"lab: {error}") from None


def _boot(spec: LabSpec, out: str | None, memory: str, timeout: str) -> int:
    from remirror.lab.host import run_lab  # only the host side needs it

    try:
        seconds = parse_duration(timeout)
    except ValueError as error:
        raise UsageError(f"lab: --timeout: {error}") from None
    return run_lab(spec, out_dir=Path(out) if out else None, timeout=seconds, memory=memory)


@click.group()
def lab() -> None:
    """A throwaway VM with two sites, for trying, rehearsing and testing."""


@lab.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@_boot_options
@click.option("--out", type=click.Path(file_okay=False), help="Copy the guest's $LAB_OUT here.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(command: tuple[str, ...], out: str | None, memory: str, timeout: str, **boot: Any) -> int:
    """Boot a fresh lab and run COMMAND as root on site A; exit with its code (124: lab failed)."""
    return _boot(_spec(command=command, **boot), out, memory, timeout)


@lab.command()
@_boot_options
def shell(memory: str, timeout: str, **boot: Any) -> int:
    """Boot a fresh lab and open a root shell on site A (`site-b` enters site B)."""
    return _boot(_spec(interactive=True, **boot), None, memory, timeout)


@lab.command()
@_boot_options
def demo(memory: str, timeout: str, **boot: Any) -> int:
    """The guided tour: boot a lab, build a mirror, break the link, watch it recover."""
    if Path(LAB_FILE).exists():  # already inside a lab: give the tour
        from remirror.lab.demo import tour

        return tour(click.echo)
    return _boot(_spec(command=("remirror", "lab", "demo"), **boot), None, memory, timeout)


_TO = click.option(
    "--to", metavar="HOST", help="In the hosts' lab: only the link to HOST (default: every link)."
)


def _in_hosts_lab(to: str | None, verb: str) -> bool:
    """Whether this is a host of the hosts' lab, whose verbs work on its own links; `--to`
    means nothing in the single-VM lab (one link)."""
    from remirror.lab.hosts.link import in_hosts_lab

    if in_hosts_lab():
        return True
    if to is not None:
        raise UsageError(f"lab {verb}: --to is for a host of the hosts' lab (this lab has one link)")
    return False


@lab.command()
@click.argument("state", type=click.Choice(["up", "down"]))
@_TO
def link(state: str, to: str | None) -> int:
    """Inside a lab: bring the link between the sites up or down (both ways). In the hosts'
    lab, on a host: its own links, cut at its end (nothing crosses, the carrier stays up)."""
    if _in_hosts_lab(to, "link"):
        from remirror.lab.hosts import link as host_links

        host_links.set_link(state == "up", to)
        return 0
    from remirror.lab import net

    net.set_link(state == "up")
    return 0


@lab.command()
@click.option("--delay", help="One-way delay, e.g. 7ms (the round trip grows by twice this).")
@click.option("--jitter", help="Delay variation, e.g. 1ms.")
@click.option("--rate", help="Bandwidth, e.g. 45mbit.")
@click.option("--loss", help="Packet loss, e.g. 0.5%.")
@click.option("--clear", is_flag=True, help="Remove the WAN emulation.")
@_TO
def wan(
    delay: str | None, jitter: str | None, rate: str | None, loss: str | None, clear: bool, to: str | None
) -> int:
    """Inside a lab: emulate a WAN between the sites (both directions). In the hosts' lab, on a
    host: on its own links, both directions shaped at its end (set it at one end only)."""
    from remirror.lab import net
    from remirror.lab.hosts import link as host_links

    hosts = _in_hosts_lab(to, "wan")
    if clear:
        if any((delay, jitter, rate, loss)):
            raise UsageError("lab wan: --clear takes no other option")
        if hosts:
            host_links.clear_wan(to)
        else:
            net.clear_wan()
        return 0
    try:
        spec = Wan(delay=delay, jitter=jitter, rate=rate, loss=loss)
    except ValueError as error:
        raise UsageError(f"lab wan: {error}") from None
    args = host_links.apply_wan(spec, to) if hosts else net.apply_wan(spec)
    click.echo(f"netem {' '.join(args)}")
    return 0
