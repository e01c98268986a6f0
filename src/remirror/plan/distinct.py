"""What a profile's names must not hide: one disk under two names, one host under two site
names. Pure: decided on what each site observed, before anything is planned.

The profile's rules already refuse a path named twice; these are the cases
only the sites can show. Either would let remirror build a mirror whose two
legs are one disk, or export a disk to itself: a mirror that protects
nothing and, once md's initial sync runs, writes a disk over itself.
"""

from __future__ import annotations

from collections.abc import Mapping

from remirror.errors import RemirrorError
from remirror.facts.site import SiteFacts
from remirror.profile.model import Profile


class SameThingTwice(RemirrorError):
    """Two of the profile's names are one disk, or one host."""


def refuse_names_for_the_same_thing(profile: Profile, facts: Mapping[str, SiteFacts | None]) -> None:
    """Raise SameThingTwice when two sites are one host, or two disks of a site one disk."""
    hosts: dict[tuple[str, str], str] = {}
    for name in sorted(facts):
        site = facts[name]
        if site is None or not site.initiator:
            continue
        # An initiator name is made once per installation: two sites with the same one and the
        # same host name are one machine (or a clone, which iSCSI cannot tell apart either).
        key = (site.hostname, site.initiator)
        if key in hosts:
            raise SameThingTwice(
                f"sites {hosts[key]} and {name} are one host ({site.hostname}, initiator"
                f" {site.initiator}): a mirror between them"
                " would protect nothing (give each site its own host, or its own initiator name"
                " if one is a clone)"
            )
        hosts[key] = name
    for name, site in facts.items():
        if site is None:
            continue
        named: dict[str, str] = {}  # kernel name -> the first path naming it
        for path in _disks_on(profile, name):
            disk = site.disks.get(path)
            if disk is None or not disk.exists or not disk.kernel_name:
                continue
            first = named.setdefault(disk.kernel_name, path)
            if first != path:
                raise SameThingTwice(
                    f"site {name}: {first} and {path} are the same disk ({disk.kernel_name}):"
                    " the profile names it twice"
                )


def _disks_on(profile: Profile, site: str) -> list[str]:
    """The disks the profile gives `site`, legs and cache disks, in profile order."""
    paths: list[str] = []
    for mirror in profile.mirrors:
        for leg in mirror.legs:
            if leg.site != site:
                continue
            paths.append(leg.disk)
            if leg.cache is not None:
                paths.append(leg.cache.disk)
    return list(dict.fromkeys(paths))
