"""What a site's own copy of its profiles lets a remote controller name there, built. Pure.

A site's agent (remirror.agent.policy) checks every request from another
site against the profiles it holds itself, in its own view (the Ansible role
gives each site the profile with itself `local`): the disks, arrays, targets
and portals those profiles name for the sites that are `local` in them. What
the controller sends is never the measure, so a controller in an attacker's
hands cannot widen it (docs/security.md). The scope's types, and the compiled form
a site keeps of it, are remirror.facts.scope's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from remirror.facts.cdp import stack_names
from remirror.facts.scope import ChapNames, SiteScope, TargetScope, Tunnel
from remirror.profile.model import Chap, Mirror, PrimaryLeg, Profile, ReplicaLeg
from remirror.profile.names import (
    array_uuid,
    backstore_name,
    cache_name,
    export_backstore_name,
    points_key,
    points_volume,
    replica_path,
)
from remirror.profile.timeouts import node_record
from remirror.profile.types import Portal
from remirror.profile.wireguard import (
    KEEPALIVE_SECONDS,
    interface_name,
    replica_portal,
    tunnel_address,
    tunnel_ends,
)
from remirror.retention import Keep


def site_scope(profiles: Iterable[tuple[str, Profile]]) -> SiteScope:
    """The union over `profiles` ((source, profile) pairs) of what each names for its local sites."""
    sources: list[str] = []
    mirrors: set[str] = set()
    disks: set[str] = set()
    arrays: set[str] = set()
    array_ids: dict[str, frozenset[tuple[str, str]]] = {}
    iqns: set[str] = set()
    portals: set[tuple[str, int]] = set()
    node_portals: dict[str, frozenset[tuple[str, int]]] = {}
    interfaces: set[str] = set()
    sites: set[str] = set()
    known_sites: set[str] = set()
    points: set[tuple[str, str]] = set()
    retention: dict[str, tuple[float, Keep]] = {}
    tunnels: dict[str, set[Tunnel]] = {}
    targets: dict[str, TargetScope] = {}
    backstores: dict[str, frozenset[str]] = {}
    logins: dict[str, frozenset[ChapNames]] = {}
    node_settings: dict[str, frozenset[tuple[str, str]]] = {}
    leg_devices: dict[str, frozenset[str]] = {}
    home_primaries: set[str] = set()
    seed_copies: dict[str, frozenset[tuple[str, str]]] = {}
    seed_legs: set[str] = set()

    def serve(iqn: str, target: TargetScope, backstore: str, devices: set[str]) -> None:
        targets[iqn] = targets[iqn].merged(target) if iqn in targets else target
        backstores[backstore] = backstores.get(backstore, frozenset()) | devices

    for source, profile in profiles:
        sources.append(source)
        local = {name for name, site in profile.sites.items() if site.is_local}
        sites |= local
        known_sites.update(profile.sites)
        for site, end in tunnel_ends(profile).items():
            if site in local:
                peers = frozenset((peer.address, peer.endpoint) for peer in end.peers)
                tunnels.setdefault(end.interface, set()).add((end.cidr, end.port, KEEPALIVE_SECONDS, peers))
        for mirror in profile.mirrors:
            if not local & set(mirror.sites):
                continue
            mirrors.add(mirror.name)
            arrays.add(mirror.md_device)
            array_ids[mirror.name] = array_ids.get(mirror.name, frozenset()) | {
                (mirror.md_device, array_uuid(profile, mirror))
            }
            if mirror.cdp is not None:
                # Two profiles naming one mirror: the longer window, the more frequent points.
                every, keep = retention.get(mirror.name, (mirror.cdp.every, mirror.cdp.retention))
                retention[mirror.name] = (min(every, mirror.cdp.every), keep.widest(mirror.cdp.retention))
            if mirror.transport == "wireguard":
                interfaces.add(interface_name(profile))
            chap = _chap_names(profile.replica_chap(mirror))
            settings = _node_settings(mirror, chap)
            for leg in mirror.legs:
                iqn = profile.replica_iqn(mirror, leg)
                iqns.add(iqn)  # a primary's too
                logins[iqn] = logins.get(iqn, frozenset()) | {chap}
                node_settings[iqn] = node_settings.get(iqn, frozenset()) | settings
                portals.update(_portals(profile, mirror, leg))
                node_portals[iqn] = node_portals.get(iqn, frozenset()) | _portals(profile, mirror, leg)
                if leg.site in local:
                    leg_devices[mirror.name] = leg_devices.get(mirror.name, frozenset()) | {
                        leg.disk,
                        *_leg_devices(mirror, leg),
                    }
                    if leg is mirror.primary:
                        home_primaries.add(mirror.name)
                    if mirror.replication.initial_sync == "seeded":
                        seed_legs.update(_leg_devices(mirror, leg))
                        if leg is mirror.primary:  # its catch-up's copies: from here, onto each replica
                            pairs = {
                                (source, replica_path(profile, mirror, replica))
                                for source in _leg_devices(mirror, leg)
                                for replica in mirror.replicas
                            }
                            seed_copies[mirror.name] = seed_copies.get(mirror.name, frozenset()) | pairs
                    backstore = backstore_name(mirror, leg)
                    target = TargetScope(
                        frozenset({chap}),
                        _target_portals(profile, mirror, leg),
                        frozenset({backstore}),
                        _leg_initiators(profile, mirror, leg),
                        _secret_files(mirror.iscsi.chap),
                    )
                    serve(profile.replica_iqn(mirror, leg), target, backstore, _leg_devices(mirror, leg))
                if leg.site in local and leg.points is not None:
                    disks.add(points_volume(mirror, leg.site))  # the leg: the disk is its points'
                    points.add((points_key(mirror, leg.site), leg.disk))
                elif leg.site in local:
                    disks.update([leg.disk, *([leg.cache.disk] if leg.cache else [])])
            if mirror.export is not None:
                export = mirror.export
                iqns.add(export.iqn)
                portals.add(_pair(export.portal_address))
                backstore = export_backstore_name(mirror)
                target = TargetScope(
                    frozenset({_chap_names(export.chap)}),
                    frozenset({_pair(export.portal_address)}),
                    frozenset({backstore}),
                    frozenset(export.initiators),
                    _secret_files(export.chap),
                )
                volume = f"/dev/mapper/{stack_names(mirror.name)['volume']}"  # CDP's, when it has one
                serve(export.iqn, target, backstore, {mirror.md_device, volume})
    return SiteScope(
        sources=tuple(sources),
        mirrors=frozenset(mirrors),
        disks=frozenset(disks),
        points=frozenset(points),
        arrays=frozenset(arrays),
        array_ids=array_ids,
        iqns=frozenset(iqns),
        portals=frozenset(portals),
        node_portals=node_portals,
        interfaces=frozenset(interfaces),
        sites=frozenset(sites),
        retention=retention,
        tunnels={name: frozenset(found) for name, found in tunnels.items()},
        targets=targets,
        backstores=backstores,
        logins=logins,
        known_sites=frozenset(known_sites),
        node_settings=node_settings,
        leg_devices=leg_devices,
        home_primaries=frozenset(home_primaries),
        seed_copies=seed_copies,
        seed_legs=frozenset(seed_legs),
    )


def _leg_initiators(profile: Profile, mirror: Mirror, leg: PrimaryLeg | ReplicaLeg) -> frozenset[str] | None:
    """Who may log in to a leg's target: the initiators of the mirror's other sites (its primary,
    and any that a promotion makes primary), as the profile names them (`sites.NAME.initiator`);
    None (any one initiator name) while one of them is not named."""
    names = [profile.sites[site].initiator for site in mirror.sites if site != leg.site]
    return None if any(name is None for name in names) else frozenset(n for n in names if n is not None)


def _node_settings(mirror: Mirror, chap: ChapNames) -> frozenset[tuple[str, str]]:
    """What remirror.plan.initiator sets in a node record of the mirror's targets (but the
    CHAP user names and passwords): the same settings, from the same profile fields."""
    settings = node_record(mirror.iscsi.timeouts, mirror.replication.on_link_loss, chap is not None)
    return frozenset(settings.items())


def _chap_names(chap: Chap | None) -> ChapNames:
    """A target's CHAP as the planner puts it on an ACL (remirror.plan.lio)."""
    if chap is None:
        return None
    return (chap.username, chap.target_username if chap.mutual else "")


def _secret_files(chap: Chap | Literal["none"] | None) -> frozenset[tuple[str, str, str]]:
    """The files of the CHAP secrets a profile names (TargetScope.secret_files); none for a
    CHAP remirror generates (`chap` left out) or for none."""
    if not isinstance(chap, Chap):
        return frozenset()
    files = {(chap.username, "password", chap.password_file)}
    if chap.mutual:
        files.add((chap.target_username, "mutual_password", chap.target_password_file))
    return frozenset(files)


def _target_portals(
    profile: Profile, mirror: Mirror, leg: PrimaryLeg | ReplicaLeg
) -> frozenset[tuple[str, int]]:
    """Where the leg's target listens: the replica's portal, a WireGuard mirror's only on its
    tunnel (a primary leg's once a promotion makes it a replica)."""
    portal = leg.portal_address
    if portal is None:
        return frozenset()
    if mirror.transport == "wireguard":
        return frozenset({(tunnel_address(profile, leg.site), portal.port)})
    return frozenset({_pair(portal)})


def _leg_devices(mirror: Mirror, leg: PrimaryLeg | ReplicaLeg) -> set[str]:
    """What a leg's backstore may serve (profile.names.leg_device): the volume over its own
    points, else its cache device (one dropped from the profile too) or its disk."""
    if leg.points is not None:
        return {points_volume(mirror, leg.site)}
    return {leg.disk, f"/dev/mapper/{cache_name(mirror, leg.site)}"}


def _portals(profile: Profile, mirror: Mirror, leg: PrimaryLeg | ReplicaLeg) -> set[tuple[str, int]]:
    """Where the leg's target listens: its portal, through the tunnel too with wireguard (a
    primary leg's only after a promotion makes it a replica)."""
    if isinstance(leg, ReplicaLeg):
        return {_pair(leg.portal_address), _pair(replica_portal(profile, mirror, leg))}
    portal = leg.portal_address
    if portal is None:
        return set()
    found = {_pair(portal)}
    if mirror.transport == "wireguard":
        found.add((tunnel_address(profile, leg.site), portal.port))
    return found


def _pair(portal: Portal) -> tuple[str, int]:
    return (portal.address, portal.port)
