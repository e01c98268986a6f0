"""`remirror init`'s work at the primary: the profile, remirror's SSH key and known hosts, a
look at the local disk, and what is left to do at the DR site.

Nothing here writes to a disk: `apply` does that, after `plan` has shown it. What `init`
writes is in /etc/remirror only, and never over a file that is there (a key other sites
already trust, a profile an operator edited).
"""

from __future__ import annotations

import contextlib
import stat
from dataclasses import dataclass
from pathlib import Path

from remirror.errors import ProfileError, UsageError
from remirror.files import write_atomically
from remirror.here import this_host
from remirror.profile.identity import SITE_FILE, seen_from, site_here
from remirror.profile.model import Profile
from remirror.profile.starter import KNOWN_HOSTS, SITE_KEY, Starter, site_name, starter_profile, starter_text
from remirror.runner.local import LocalRunner

FORCED_COMMAND = 'command="remirror agent --serve",restrict'


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


def check_primary_disk(answers: Starter) -> None:
    """The primary's disk must be a block device here (before anything is written)."""
    try:
        mode = Path(answers.primary_disk).stat().st_mode
    except OSError as error:
        raise UsageError(f"--primary-disk {answers.primary_disk}: {error.strerror}") from None
    if not stat.S_ISBLK(mode):
        raise UsageError(f"--primary-disk {answers.primary_disk}: not a block device")


def what_holds(profile: Profile, site: str, disk: str) -> list[str]:
    """What is on `disk` at this site, or using it, as words; empty when it is blank."""
    from remirror.controller import Controller  # the agent's observation, in-process

    controller = Controller(profile)
    try:
        facts = controller.observe_site(site).disks[disk]
    finally:
        controller.close()
    return [signature.describe() for signature in facts.signatures] + facts.users()


def initialize(answers: Starter, profile_path: Path) -> Written:
    """Write the profile, the key and known hosts; look at the primary's disk."""
    if profile_path.exists():
        raise UsageError(f"{profile_path} exists: remove it first, or give another --profile")
    check_primary_disk(answers)
    profile = starter_profile(answers, str(profile_path))  # checked before anything is written
    primary = profile.mirrors[0].primary.site
    dr = profile.mirrors[0].replicas[0].site
    dr_address = profile.sites[dr].ssh_address.host
    primary_address = profile.sites[primary].ssh_address.host
    run = LocalRunner("local").run
    # The DR host's key first: an unreachable DR host stops init before it writes anything.
    scanned = run(["ssh-keyscan", "-T", "10", "-t", "ed25519", dr_address], ok_codes=(0, 1)).stdout
    dr_key = [line for line in scanned.splitlines() if line and not line.startswith("#")]
    if not dr_key:
        raise UsageError(f"--dr {answers.dr_host}: no SSH host key from {dr_address}:22 (is sshd up there?)")
    own_key = Path("/etc/ssh/ssh_host_ed25519_key.pub").read_text().split()[:2]
    site_file_written = _name_this_site(profile, primary)
    key_made = not Path(SITE_KEY).exists()
    if key_made:  # ssh-keygen makes the private half 0600; /etc/remirror is root's alone
        Path(SITE_KEY).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"remirror@{primary}", "-f", SITE_KEY])
    known = Path(KNOWN_HOSTS)
    lines = known.read_text().splitlines() if known.exists() else []
    for entry in (f"{primary_address} {' '.join(own_key)}", dr_key[0]):
        if entry not in lines:
            lines.append(entry)
    write_atomically(known, "\n".join(lines) + "\n", mode=0o644)
    write_atomically(profile_path, starter_text(answers), mode=0o600)
    fingerprint = run(["ssh-keygen", "-l", "-f", "-"], stdin=dr_key[0] + "\n").stdout.strip()
    public = Path(SITE_KEY + ".pub").read_text().strip()
    return Written(
        profile_path=profile_path,
        key_made=key_made,
        dr_host_key=fingerprint,
        authorized_line=f"{FORCED_COMMAND} {public}",
        primary_site=primary,
        dr_site=dr,
        site_file_written=site_file_written,
        disk=what_holds(seen_from(profile, primary), primary, answers.primary_disk),
    )


def _name_this_site(profile: Profile, primary: str) -> bool:
    """Write /etc/remirror/site when this host would not find itself as `primary` by its name;
    refused when the file names another site."""
    here = this_host(environment=False)
    if here.site_file is not None:
        if here.site_file != primary:
            raise UsageError(f"{SITE_FILE} names {here.site_file!r}; this host is to be {primary!r}")
        return False
    with contextlib.suppress(ProfileError):  # none or two: the file says it outright
        if site_here(profile, here) == primary:
            return False
    Path(SITE_FILE).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_atomically(SITE_FILE, primary + "\n", mode=0o644)
    return True


__all__ = ["Starter", "Written", "initialize", "site_name"]
