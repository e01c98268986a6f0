"""`remirror lab`: boot a throwaway two-site VM; control its link from inside."""

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


@lab.command()
@click.argument("state", type=click.Choice(["up", "down"]))
def link(state: str) -> int:
    """Inside a lab: bring the link between the sites up or down."""
    from remirror.lab import net

    net.set_link(state == "up")
    return 0


@lab.command()
@click.option("--delay", help="One-way delay, e.g. 7ms (the round trip grows by twice this).")
@click.option("--jitter", help="Delay variation, e.g. 1ms.")
@click.option("--rate", help="Bandwidth, e.g. 45mbit.")
@click.option("--loss", help="Packet loss, e.g. 0.5%.")
@click.option("--clear", is_flag=True, help="Remove the WAN emulation.")
def wan(delay: str | None, jitter: str | None, rate: str | None, loss: str | None, clear: bool) -> int:
    """Inside a lab: emulate a WAN between the sites (both directions)."""
    from remirror.lab import net

    if clear:
        if any((delay, jitter, rate, loss)):
            raise UsageError("lab wan: --clear takes no other option")
        net.clear_wan()
        return 0
    try:
        spec = Wan(delay=delay, jitter=jitter, rate=rate, loss=loss)
    except ValueError as error:
        raise UsageError(f"lab wan: {error}") from None
    click.echo(f"netem {' '.join(net.apply_wan(spec))}")
    return 0
