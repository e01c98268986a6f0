"""`remirror init`: from two hosts and a disk on each to a profile, a key, and the steps left."""

from __future__ import annotations

import os
from pathlib import Path

import click

from remirror.errors import UsageError

# What init asks, in order: option name, question, default (None: no default).
QUESTIONS = (
    ("name", "A name for the mirror (its device is /dev/md/NAME)", "data"),
    ("primary", "This host, as the DR host reaches it (a name or an address)", None),
    ("primary_disk", "The disk to mirror here (/dev/disk/by-id/...)", None),
    ("dr", "The DR host, as this host reaches it", None),
    ("dr_disk", "The disk it gets at the DR host (/dev/disk/by-id/..., blank)", None),
    ("mode", "Mode: sync (no acknowledged write lost) or async (writes wait for this disk only)", "sync"),
)


@click.command()
@click.option("--name", help="The mirror's and the profile's name (default: data).")
@click.option("--primary", "primary", metavar="HOST", help="This host, as the DR host reaches it.")
@click.option("--primary-disk", metavar="DISK", help="The disk to mirror here.")
@click.option("--dr", "dr", metavar="HOST", help="The DR host, as this host reaches it.")
@click.option("--dr-disk", metavar="DISK", help="The disk the mirror gets at the DR host.")
@click.option("--dr-address", metavar="ADDRESS",
              help="The DR host's IP address for iSCSI, where --dr is a name (default: as it"
              " resolves here).")  # fmt: skip
@click.option("--mode", type=click.Choice(["sync", "async"]), help="sync (default) or async.")
@click.option("--profile", "profile_path", type=click.Path(dir_okay=False), default=None,
              help="Where to write the profile (default: /etc/remirror/NAME.yaml).")  # fmt: skip
@click.option("--dr-host-key", metavar="SHA256:...",
              help="The DR host's SSH key's fingerprint (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub"
              " there): init goes on only if the key it finds is that one.")  # fmt: skip
@click.option("--yes", is_flag=True, help="Ask nothing: every answer from the options (for scripts).")
def init(
    profile_path: str | None, yes: bool, dr_host_key: str | None, dr_address: str | None, **given: str | None
) -> int:
    """Start a two-site mirror here, at the primary: write its profile and remirror's SSH key,
    look at the disk, and print what is left to do at the DR host."""
    from remirror.onboarding import Starter, initialize

    answers: dict[str, str] = {}
    for option, question, default in QUESTIONS:
        value = given.get(option) or (default if yes else None)
        if value is None and yes:
            raise UsageError(f"--{option.replace('_', '-')} is needed with --yes")
        if value is None:
            suggested = os.uname().nodename if option == "primary" else default
            value = click.prompt(question, default=suggested, type=str)
        answers[option] = value.strip()
    if answers["mode"] not in ("sync", "async"):
        raise UsageError(f"mode {answers['mode']!r}: sync or async")
    starter = Starter(
        name=answers["name"],
        primary_host=answers["primary"],
        primary_disk=answers["primary_disk"],
        dr_host=answers["dr"],
        dr_disk=answers["dr_disk"],
        mode="async" if answers["mode"] == "async" else "sync",
        dr_address=(dr_address or "").strip(),
    )
    name = starter.name
    path = Path(profile_path or f"/etc/remirror/{name}.yaml")

    def confirm(fingerprint: str) -> bool:
        """The DR host's key: the one given, or the operator's word (with --yes and none
        given, taken as found, as ssh's accept-new does; known_hosts keeps it from then on)."""
        if dr_host_key is not None:
            return dr_host_key in fingerprint.split()
        if yes:
            return True
        click.echo(f"The DR host's SSH key: {fingerprint}")
        click.echo("Compare it with `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` there.")
        return click.confirm("Is it the same", default=False)

    try:
        done = initialize(starter, path, confirm)
    except ValueError as error:  # an answer that is not a name, a host or a device path
        raise UsageError(str(error)) from None
    click.echo(f"Wrote {path} (sites {done.primary_site}, here, and {done.dr_site}).")
    if path != Path(f"/etc/remirror/{name}.yaml"):
        click.echo(f"The units (remirror-start@{name}, ...) read /etc/remirror/{name}.yaml: put it there.")
    click.echo(
        f"{'Made' if done.key_made else 'Kept'} remirror's SSH key /etc/remirror/id_ed25519;"
        f" the DR host's key in /etc/remirror/known_hosts is {done.dr_host_key}"
        f" (check it there: ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub)."
    )
    click.echo(
        f"iSCSI: {starter.dr_host}'s target will listen on {done.portal}, where this host reaches it"
        " (--dr-address to choose another address of it)."
    )
    if done.site_file_written:
        click.echo(f"This host's name is none of the sites': /etc/remirror/site says {done.primary_site}.")
    held = "; ".join(done.disk)
    click.echo(
        f"{starter.primary_disk}: {'blank' if not done.disk else 'holds ' + held}"
        + ("" if not done.disk else " (apply refuses it unless told: docs/safety.md)")
    )
    click.echo(f"""
At {starter.dr_host}, as root (remirror installed: docs/quickstart.md):
  1. Copy {path} and /etc/remirror/id_ed25519 from here into /etc/remirror/ (a directory
     for root only: mkdir -m 700 /etc/remirror), and add the lines of this host's
     /etc/remirror/known_hosts to its own.
  2. Add this line to /root/.ssh/authorized_keys (here too, for a failover):
     {done.authorized_line}
  3. If its host name (uname -n) is neither {done.dr_site} nor {starter.dr_host}:
     echo {done.dr_site} > /etc/remirror/site
  4. systemctl enable --now iscsid rtslib-fb-targetctl
     systemctl enable remirror-start@{name}    # at its boots, once the mirror is made

Then here:
  remirror plan {path}       # what apply will do, and what is on {starter.dr_host}'s disk
  remirror apply {path}
  systemctl enable remirror-start@{name}
  systemctl enable --now remirror-watch@{name} remirror-check@{name}.timer""")
    return 0
