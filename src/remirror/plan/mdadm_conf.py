"""Plan each site's /etc/mdadm/mdadm.conf: what boot and udev may assemble. Pure: no I/O.

remirror owns one block of the file, between CONF_BEGIN and CONF_END; the
rest is the administrator's and is kept as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from remirror.facts.mdadm_conf import merged_conf
from remirror.facts.parsers import MDADM_CONF
from remirror.facts.site import SiteFacts
from remirror.plan.actions import CHANGE, Action, Verb
from remirror.profile.model import Mirror, Profile
from remirror.profile.names import array_uuid
from remirror.protocol.steps import ArrayLine, MdadmConfArrays


def _conf_lines(
    profile: Profile, facts: Mapping[str, SiteFacts], without: Mirror | None = None
) -> dict[str, list[ArrayLine]]:
    """remirror's lines in each site's mdadm.conf: ARRAY for a primary, <ignore> for a replica disk.

    `without`: a mirror being destroyed. Its primary's line turns into
    <ignore> as well: the disks still hold the array (destroy keeps data),
    and a boot must not assemble it until `apply` says so again. So does the
    line of a mirror whose primary leg has a cache (see below).
    """
    lines: dict[str, list[ArrayLine]] = {site: [] for mirror in profile.mirrors for site in mirror.sites}
    for mirror in profile.mirrors:
        uuid_ = array_uuid(profile, mirror)
        for replica in mirror.replicas:
            lines[replica.site].append(ArrayLine(uuid_))
        # A primary leg behind a cache: its disk alone carries the array's superblock too,
        # but not what the cache holds. Assembling from it at boot would lose those writes:
        # apply assembles the array once the cache device exists.
        ignored = mirror is without or mirror.primary.cache is not None
        lines[mirror.primary.site].append(
            ArrayLine(uuid_)
            if ignored
            else ArrayLine(uuid_, mirror.md_device, _metadata(mirror, facts, uuid_), mirror.name)
        )
    return lines


def _metadata(mirror: Mirror, facts: Mapping[str, SiteFacts], uuid_: str) -> Literal["1.0", "1.2"]:
    """The array's md metadata version: as its primary leg's superblock says, or as `apply` will
    create it (1.0 keeps a file system in place: keep_data; else 1.2)."""
    site = facts.get(mirror.primary.site)
    disk = site.disks.get(mirror.primary.disk) if site is not None else None
    superblock = disk.superblock if disk is not None else None
    if superblock is not None and superblock.array_uuid == uuid_ and superblock.version in ("1.0", "1.2"):
        return "1.0" if superblock.version == "1.0" else "1.2"
    return "1.0" if mirror.primary.keep_data else "1.2"


def mdadm_conf_actions(
    profile: Profile, facts: Mapping[str, SiteFacts], without: Mirror | None = None
) -> list[Action]:
    """Each site's mdadm.conf with remirror's block as the profile wants it, where it differs."""
    actions = []
    for site_name, lines in _conf_lines(profile, facts, without).items():
        if site_name not in facts:  # not reached (a forced promotion): its file is written when it is
            continue
        current = facts[site_name].mdadm_conf
        # A mirror dropped from the profile keeps its line: the site keeps every line of its
        # block the step does not name (docs/safety.md, flow 9). Only a person removes one.
        wanted = merged_conf(current, [line.text() for line in lines])
        if wanted != current:
            actions.append(
                Action(
                    site_name,
                    Verb.WRITE_MDADM_CONF,
                    f"{MDADM_CONF} (arrays assemble by name; replica disks never do)",
                    CHANGE,
                    (MdadmConfArrays(tuple(lines)),),
                )
            )
    return actions


def with_mdadm_conf(actions: list[Action], conf: list[Action]) -> list[Action]:
    """The plan's actions with the sites' new mdadm.conf around them.

    mdadm.conf says what boot and udev may assemble. A site that stops an
    array (to hand it over, or for good) gets its new file first: udev's
    incremental assembly would otherwise take the stopped legs again at the
    next change event (a leg record written, for one). The other sites get
    theirs last, once their arrays run.
    """
    stopping = {a.site for a in actions if a.verb == Verb.STOP_ARRAY}
    return [a for a in conf if a.site in stopping] + actions + [a for a in conf if a.site not in stopping]
