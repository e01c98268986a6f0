"""`remirror init`'s work at the primary: the profile, remirror's SSH key and known hosts, a
look at the local disk, and what is left to do at the DR site.

Nothing here writes to a disk: `apply` does that, after `plan` has shown it. What `init`
writes is in /etc/remirror only, and only once everything has been checked and read (the DR
host's key, this host's, the disk): a refusal changes nothing. It never writes over a file an
operator or another profile relies on (a profile, a key, another key for the DR host's name,
a site name another profile would not know).
"""

from __future__ import annotations

import ipaddress
import os
import socket
import stat
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from remirror.errors import ProfileError, RemirrorError, UsageError
from remirror.files import write_atomically
from remirror.here import this_host
from remirror.profile.identity import SITE_FILE, Here, find_site, seen_from, site_here
from remirror.profile.loader import load_profile
from remirror.profile.model import Profile
from remirror.profile.starter import ISCSI_PORT, KNOWN_HOSTS, SITE_KEY, Starter, starter_profile, starter_text
from remirror.runner.local import LocalRunner

FORCED_COMMAND = 'command="remirror agent --serve",restrict'
OWN_HOST_KEY = Path("/etc/ssh/ssh_host_ed25519_key.pub")


@dataclass(frozen=True)
class Written:
    """What `init` made, and what the operator does next."""

    profile_path: Path
    key_made: bool
    dr_host_key: str  # the DR host's key's fingerprint, as ssh-keygen -l prints it
    authorized_line: str  # for root's authorized_keys at the DR site (and here, for a failover)
    primary_site: str
    dr_site: str
    site_file_written: bool
    disk: list[str]  # what holds the primary's disk; empty: blank
    portal: str  # where the DR host's target listens, and the primary's iSCSI reaches it


def resolve_dr_address(host: str) -> str:
    """The IP address `host` resolves to here (itself if it is one): where the primary's iSCSI
    reaches the DR host, and its target listens. IPv4 first where it has both (iSCSI's usual
    path); never this host's own loopback (Debian names a host 127.0.1.1 in its own
    /etc/hosts) nor an address no target can be reached at from another host."""
    try:
        found = [str(ipaddress.ip_address(host))]
    except ValueError:
        try:
            infos = socket.getaddrinfo(host, ISCSI_PORT, type=socket.SOCK_STREAM)
        except OSError as error:
            raise UsageError(
                f"--dr {host}: does not resolve here ({error}); give its address with --dr-address"
            ) from None
        found = sorted({str(info[4][0]) for info in infos}, key=lambda a: (":" in a, a))
    usable = [a for a in found if not _local_only(a)]
    if not usable:
        raise UsageError(
            f"--dr {host}: resolves here to {', '.join(found)}, which no other host reaches it at;"
            " give its address with --dr-address"
        )
    return usable[0]


def _local_only(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    return ip.is_loopback or ip.is_link_local or ip.is_unspecified


def initialize(answers: Starter, profile_path: Path, confirm: Callable[[str], bool]) -> Written:
    """Check everything, then write the key, known hosts, the profile and (last) the site file.
    `confirm(fingerprint)`: whether the DR host's key is the one the operator expects."""
    if os.geteuid() != 0:
        raise UsageError("init: run it as root (it writes /etc/remirror and reads the disks)")
    if profile_path.exists():
        raise UsageError(f"{profile_path} exists: remove it first, or give another --profile")
    if answers.primary_host.casefold() == answers.dr_host.casefold():
        raise UsageError(f"--primary and --dr are the same host ({answers.primary_host})")
    _check_primary_disk(answers.primary_disk)
    answers = replace(answers, dr_address=resolve_dr_address(answers.dr_address or answers.dr_host))
    profile = starter_profile(answers, str(profile_path))
    primary, dr = profile.mirrors[0].primary.site, profile.mirrors[0].replicas[0].site
    site_file = _site_file_needed(profile, primary)
    run = LocalRunner("local").run
    dr_address = profile.sites[dr].ssh_address.host
    scanned = run(["ssh-keyscan", "-T", "10", "-t", "ed25519", "--", dr_address], ok_codes=(0, 1)).stdout
    dr_key = next((line.split() for line in scanned.splitlines() if line and not line.startswith("#")), [])
    if len(dr_key) < 3:
        raise UsageError(f"--dr {answers.dr_host}: no SSH host key from {dr_address}:22 (is sshd up there?)")
    own_key = _read(OWN_HOST_KEY).split()[:2]
    if dr_key[1:3] == own_key:
        raise UsageError(f"--dr {answers.dr_host} answers with this host's own SSH key: it is this host")
    fingerprint = run(["ssh-keygen", "-l", "-f", "-"], stdin=" ".join(dr_key) + "\n").stdout.strip()
    known_lines = _known_hosts(
        {profile.sites[primary].ssh_address.host: own_key, dr_address: dr_key[1:3]}, Path(KNOWN_HOSTS)
    )
    held = what_holds(seen_from(profile, primary), primary, answers.primary_disk)
    if not confirm(fingerprint):
        raise UsageError(f"--dr {answers.dr_host}: its SSH host key was not confirmed; nothing written")
    # Everything checked and read: now the writes, the site file last (what every profile of
    # this host is read with).
    key_made = not Path(SITE_KEY).exists()
    if key_made:  # ssh-keygen makes the private half 0600; /etc/remirror is root's alone
        Path(SITE_KEY).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"remirror@{primary}", "-f", SITE_KEY])
    # The key's own public half (not a .pub that may be stale), named for this site.
    public = " ".join(run(["ssh-keygen", "-y", "-f", SITE_KEY]).stdout.split()[:2])
    _write(Path(KNOWN_HOSTS), known_lines, 0o644)
    _write(profile_path, starter_text(answers), 0o600)
    if site_file:
        _write(Path(SITE_FILE), primary + "\n", 0o644)
    return Written(
        profile_path=profile_path,
        key_made=key_made,
        dr_host_key=fingerprint,
        authorized_line=f"{FORCED_COMMAND} {public} remirror@{primary}",
        primary_site=primary,
        dr_site=dr,
        site_file_written=site_file,
        disk=held,
        portal=str(profile.mirrors[0].replicas[0].portal),
    )


def what_holds(profile: Profile, site: str, disk: str) -> list[str]:
    """What is on `disk` at this site, or using it, as words; empty when it is blank."""
    from remirror.controller import Controller  # the agent's observation, in-process

    controller = Controller(profile)
    try:
        facts = controller.observe_site(site).disks[disk]
    finally:
        controller.close()
    return [signature.describe() for signature in facts.signatures] + facts.users()


def _check_primary_disk(disk: str) -> None:
    try:
        mode = Path(disk).stat().st_mode
    except OSError as error:
        raise UsageError(f"--primary-disk {disk}: {error.strerror}") from None
    if not stat.S_ISBLK(mode):
        raise UsageError(f"--primary-disk {disk}: not a block device")


def _site_file_needed(profile: Profile, primary: str) -> bool:
    """Whether /etc/remirror/site must name `primary` (this host's name does not say it); refused
    when this host is another site of the new profile, when the site file names another site,
    or when another profile of this host would not know the name."""
    here = this_host(environment=False)
    try:
        found, _how = find_site(profile, Here(hostname=here.hostname))
    except ProfileError:
        found = None
    if found is not None and found != primary:
        raise UsageError(f"this host's name ({here.hostname}) is site {found}'s: run init at the primary")
    if here.site_file is not None:
        if here.site_file != primary:
            raise UsageError(f"{SITE_FILE} names {here.site_file!r}; this host would be {primary!r} here")
        return False
    if found == primary:
        return False
    for other in sorted(Path(SITE_FILE).parent.glob("*.yaml")):
        try:
            site_here(load_profile(other), Here(site_file=primary, hostname=here.hostname))
        except ProfileError as error:
            raise UsageError(
                f"{SITE_FILE} would name {primary!r}, and {other} would no longer load"
                f" ({error.problems[0].message}): give --primary the name this host has there"
            ) from None
    return True


def _known_hosts(keys: dict[str, list[str]], path: Path) -> str:
    """known_hosts with a line for each host's key added; refused when it holds another key for
    that name (a reinstalled host, or one answering in its place: the operator decides)."""
    lines = _read(path).splitlines() if path.exists() else []
    for host, (kind, key) in keys.items():
        held = [line.split() for line in lines if line.split()[:1] == [host]]
        if any(words[1:3] != [kind, key] for words in held):
            raise UsageError(
                f"{path} holds another key for {host}: remove that line if the host was reinstalled"
            )
        if not held:
            lines.append(f"{host} {kind} {key}")
    return "\n".join(lines) + "\n"


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as error:
        raise UsageError(f"{path}: {error.strerror}") from None


def _write(path: Path, text: str, mode: int) -> None:
    try:
        write_atomically(path, text, mode=mode)
    except OSError as error:
        raise RemirrorError(f"{path}: {error.strerror}") from None


__all__ = ["Starter", "Written", "initialize"]
