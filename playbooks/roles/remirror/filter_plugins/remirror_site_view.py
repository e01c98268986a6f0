"""Ansible filter: one site's own view of a remirror profile.

A profile is written as its primary sees it: that site is `host: local`, the others are reached
over SSH. remirror runs on whichever host it is started on, so the DR site needs the same profile
with the roles of `local` and `ssh://` turned around: that is the copy its operator promotes from
when the primary is gone (docs/failover.md, "Running the commands from the DR site"). The names
stay as they are, so the array's UUID, the target names and the leg records are the same from
every site.

In each site's view:
- the site itself is `host: local` (and needs no `ssh:`);
- a site that was `local` (the primary) is reached at its SSH address: the `addresses` given for
  it, else its inventory host's `ansible_host`, else its inventory name, as `root@` over port 22;
  with the same `ssh:` keys the primary used to reach this site (the role deploys one key and one
  known_hosts file to every site);
- every other site keeps its entry.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError


def site_view(
    profile: Mapping[str, Any],
    site: str,
    addresses: Mapping[str, str] | None = None,
    hostvars: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """`profile` as remirror would run on `site`: itself local, the sites that were local over SSH."""
    sites = profile.get("sites") if isinstance(profile, Mapping) else None
    if not isinstance(sites, Mapping):
        raise AnsibleFilterError("remirror_site_view: the profile has no sites mapping")
    if site not in sites:
        raise AnsibleFilterError(
            f"remirror_site {site!r} is not a site of the profile ({', '.join(sorted(sites))}):"
            " name the inventory host after its site, or set remirror_site"
        )
    view = copy.deepcopy(dict(profile))  # the caller's mapping (group_vars) stays as it is
    view["sites"] = {name: entry or {} for name, entry in view["sites"].items()}
    own = view["sites"][site]
    keys = copy.deepcopy(own.get("ssh"))  # how the primary reached this site: the deployed keys
    for name, entry in view["sites"].items():
        if name == site:
            entry["host"] = "local"
            entry.pop("ssh", None)
        elif entry.get("host") == "local":
            entry["host"] = _ssh_url(_address(name, addresses or {}, hostvars or {}))
            if keys is not None:
                entry["ssh"] = copy.deepcopy(keys)
            else:
                entry.pop("ssh", None)
    return view


def _address(name: str, addresses: Mapping[str, str], hostvars: Mapping[str, Mapping[str, Any]]) -> str:
    if name in addresses:
        return str(addresses[name])
    host = hostvars.get(name)
    if host is not None and host.get("ansible_host"):
        return str(host["ansible_host"])
    return name


def _ssh_url(address: str) -> str:
    """An address as the profile writes a site's host: ssh://user@host:port."""
    if address.startswith("ssh://"):
        return address
    if "@" not in address:
        address = f"root@{address}"
    return f"ssh://{address}"


def points_mirrors(profile: Mapping[str, Any], site: str) -> list[str]:
    """The mirrors whose leg on `site` keeps its own recovery points (`replicas[].points`): that
    site's `remirror cdp run` takes and prunes them (docs/security.md)."""
    return [
        str(mirror.get("name"))
        for mirror in profile.get("mirrors") or []
        if any(leg.get("site") == site and leg.get("points") for leg in mirror.get("replicas") or [])
    ]


def drill_mirrors(profile: Mapping[str, Any], site: str) -> list[str]:
    """The mirrors whose replica on `site` has `drill:`: that site drills them on its timer
    (docs/drill.md)."""
    return [
        str(mirror.get("name"))
        for mirror in profile.get("mirrors") or []
        if any(leg.get("site") == site and leg.get("drill") for leg in mirror.get("replicas") or [])
    ]


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "remirror_site_view": site_view,
            "remirror_points_mirrors": points_mirrors,
            "remirror_drill_mirrors": drill_mirrors,
        }
