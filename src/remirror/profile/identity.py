"""Which of a profile's sites this host is: one profile, copied unchanged to every site. Pure.

As DRBD's one resource file, where each node finds its own `on` section by its host name, a
profile names every site with the address the others reach it at (`host: ssh://...`), and the
host remirror runs on finds itself among them, in this order:

1. the name it is given (`remirror --site NAME`, or REMIRROR_SITE in a unit's environment);
2. a site written `host: local`: the profile was written for that site (as every profile was
   before one file served every site; such profiles keep working unchanged);
3. the name in /etc/remirror/site, for a host whose name is none of its sites';
4. its host name (`uname -n`): the one site named so, or whose ssh:// host is that name (a
   name's first label counts as the name: `backup-7` is `backup-7.acme.example`).

A name that is none of the profile's sites, a host that matches none or more than one, and a
given name that contradicts a site written `host: local` are refused, naming the profile:
acting as the wrong site would let another site's disks be named here (docs/security.md).
The site found is then `host: local` (without its `ssh:` options, which say how the others
reach it), so the rest of remirror reads `Site.is_local` as it always has.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from remirror.errors import ProfileError
from remirror.profile.loader import problem_at
from remirror.profile.model import Profile

SITE_FILE = "/etc/remirror/site"


@dataclass(frozen=True)
class Here:
    """What a host knows of itself (remirror.here gathers it). `named`: the site it was told it
    is, and `named_by` who told it (`--site`, `REMIRROR_SITE`); `site_file`: the name the site
    file holds, if there is one; `hostname`: `uname -n`."""

    named: str | None = None
    named_by: str = "--site"
    site_file: str | None = None
    hostname: str = ""


def site_here(profile: Profile, here: Here) -> str:
    """The name of the site this host is, in `profile`; ProfileError when that cannot be told."""
    sites = ", ".join(sorted(profile.sites))
    written_local = sorted(name for name, site in profile.sites.items() if site.is_local)
    for given, by in ((here.named, here.named_by), (here.site_file, SITE_FILE)):
        if given is None:
            continue
        if given not in profile.sites:
            raise _refused(profile, f"{by} names {given!r}, which is not one of its sites ({sites})")
        if written_local and given not in written_local:
            raise _refused(
                profile,
                f"{by} names {given!r}, but the profile was written for {written_local[0]!r} (its"
                f" `host: local`): give every site its ssh:// address and copy the same file to each",
            )
        return given
    if written_local:
        return written_local[0]
    names = _host_names(here.hostname)
    matches = sorted(
        name
        for name, site in profile.sites.items()
        if name.casefold() in names or _host_names(site.ssh_address.host) & names
    )
    if len(matches) == 1:
        return matches[0]
    if not matches:
        what = f"this host ({here.hostname or 'no host name'}) is none of its sites ({sites})"
    else:
        what = f"this host ({here.hostname}) could be any of the sites {', '.join(matches)}"
    raise _refused(profile, f"{what}: say which with --site NAME or in {SITE_FILE}")


def seen_from(profile: Profile, site: str) -> Profile:
    """`profile` as remirror runs it on `site`: that site `host: local`, the others as written."""
    if profile.sites[site].is_local:
        return profile
    local = profile.sites[site].model_copy(update={"host": "local", "ssh": None})
    # model_copy keeps the private attributes: the file and its positions, for later messages.
    return profile.model_copy(update={"sites": {**profile.sites, site: local}})


def as_seen_here(profile: Profile, here: Here) -> Profile:
    """`profile` with the site this host is made `host: local`."""
    return seen_from(profile, site_here(profile, here))


def _host_names(host: str) -> set[str]:
    """The names a host goes by: its whole name and its first label (`uname -n` may say either
    where the profile says the other), casefolded (host names are not case-sensitive); an
    address is only itself."""
    if not host:
        return set()
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return {host.casefold(), host.split(".", 1)[0].casefold()}
    return {host}


def _refused(profile: Profile, message: str) -> ProfileError:
    return ProfileError([problem_at(profile, ("sites",), message)])
