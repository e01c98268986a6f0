"""Ansible filters: what a site of a remirror profile runs besides the mirror itself.

Every site gets the same profile (remirror finds which site it is: /etc/remirror/site, which
the role writes from `remirror_site`); these say which of a site's units the role enables.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


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


def verify_mirrors(profile: Mapping[str, Any], site: str) -> list[str]:
    """The mirrors whose primary is `site`: that site compares their legs on its timer
    (`remirror verify`, docs/status.md)."""
    return [
        str(mirror.get("name"))
        for mirror in profile.get("mirrors") or []
        if (mirror.get("primary") or {}).get("site") == site
    ]


class FilterModule:
    """remirror.remirror.points_mirrors, drill_mirrors and verify_mirrors."""

    def filters(self) -> dict[str, Any]:
        return {
            "points_mirrors": points_mirrors,
            "drill_mirrors": drill_mirrors,
            "verify_mirrors": verify_mirrors,
        }
