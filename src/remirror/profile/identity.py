"""Which of a profile's sites this host is: one profile, copied unchanged to every site. Pure.

As DRBD's one resource file, where each node finds its own `on` section by its host name, a
profile names every site with the address the others reach it at (`host: ssh://...`), and the
host remirror runs on finds itself among them, in this order:

1. the name it is given (`remirror --site NAME`, or REMIRROR_SITE in a unit's environment);
2. the one word in /etc/remirror/site (the host's site in every profile it holds);
3. a site written `host: local`: a profile written for that one site, as every profile was
   before one file served every site, keeps meaning it;
4. its host name (`uname -n`), whole: the one site named so, or whose ssh:// host is so named
   (host names compare without case; nothing shorter counts: `backup-7` is not
   `backup-7.acme.example`, and names a site only by its name).

Refused, naming the profile, because acting as the wrong site would make another site's disks
this host's (docs/security.md): a name given (1, 2) that is none of the sites, or another site
than the one written `host: local`, or another than the one the host's name is; a profile
written `host: local` for one site on a host whose name is another site's (copied to the
wrong host); a host none of whose names is a site's, or whose name is two sites'. The site
found is then `host: local` (without its `ssh:` options, which say how the others reach
it), so the rest of remirror reads `Site.is_local` as it always has.
"""

from __future__ import annotations

from dataclasses import dataclass

from remirror.errors import ProfileError
from remirror.profile.loader import problem_at
from remirror.profile.model import Profile

SITE_FILE = "/etc/remirror/site"
ASK = f"say which with --site NAME or in {SITE_FILE}"


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
    return find_site(profile, here)[0]


def find_site(profile: Profile, here: Here) -> tuple[str, str]:
    """The site this host is and how that was found (for `validate` to say)."""
    sites = ", ".join(sorted(profile.sites))
    written_local = sorted(name for name, site in profile.sites.items() if site.is_local)
    by_name = _named_by_host_name(profile, here.hostname)
    given_first = here.named if here.named is not None else here.site_file
    if len(by_name) > 1:
        if given_first not in by_name:
            raise _refused(
                profile, f"this host ({here.hostname}) is named as the sites {', '.join(by_name)}: {ASK}"
            )
        by_name = [given_first]  # the name given says which of them
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
        if by_name and by_name != [given]:  # a stale site file on a renamed or cloned host
            raise _refused(
                profile,
                f"{by} names {given!r}, but this host's name ({here.hostname}) is site {by_name[0]}'s",
            )
        return given, by
    if written_local:
        if by_name and by_name != written_local[:1]:  # another site's copy, on this host
            raise _refused(
                profile,
                f"the profile was written for {written_local[0]!r} (its `host: local`), but this host's"
                f" name ({here.hostname}) is site {by_name[0]}'s: give every site its ssh:// address",
            )
        return written_local[0], "its `host: local`"
    if not by_name:
        raise _refused(
            profile, f"this host's name ({here.hostname or 'none'}) is none of its sites ({sites}): {ASK}"
        )
    return by_name[0], f"its host name {here.hostname}"


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


def _named_by_host_name(profile: Profile, hostname: str) -> list[str]:
    """The sites whose name, or whose ssh:// host, is this host's whole name (without case)."""
    if not hostname:
        return []
    name = hostname.casefold()
    return sorted(
        site_name
        for site_name, site in profile.sites.items()
        if site_name == name or (not site.is_local and site.ssh_address.host.casefold() == name)
    )


def _refused(profile: Profile, message: str) -> ProfileError:
    return ProfileError([problem_at(profile, ("sites",), message)])
