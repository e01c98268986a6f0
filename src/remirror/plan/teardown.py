"""Plan `remirror destroy`: undo what apply built for one mirror, in reverse. Pure: no I/O.

Only remirror's objects go: the export, the array (stopped, not zeroed),
the sessions and node records, the replica targets and backstores, and the
legs' caches (written back first). The disks keep their data and md
superblocks, so a later `apply` adopts them again; until then every site's
mdadm.conf carries `ARRAY <ignore>` for them, so that no boot or udev event
assembles half a mirror.
"""

from __future__ import annotations

from collections.abc import Mapping

from remirror.facts.site import DiskFacts, SiteFacts
from remirror.plan.actions import Action, Plan, PlanError
from remirror.plan.cache import CacheError, removal_actions
from remirror.plan.cdp import deactivation_actions, stack_kernel_names, volume_path
from remirror.plan.initiator import logout_actions
from remirror.plan.lio import export_removal_actions, leg_export_removal
from remirror.plan.md import stop_array_action
from remirror.plan.mdadm_conf import mdadm_conf_actions, with_mdadm_conf
from remirror.plan.points import points_deactivation
from remirror.profile.model import Mirror, Profile
from remirror.profile.names import array_uuid, cache_name, export_backstore_name, points_volume


def make_teardown(profile: Profile, mirror: Mirror, facts: Mapping[str, SiteFacts]) -> Plan:
    """The actions that remove `mirror` from its sites; PlanError if it is in use."""
    primary = facts[mirror.primary.site]
    actions: list[Action] = []
    actions += export_removal_actions(mirror, primary)
    array = primary.array_named(mirror.name, array_uuid(profile, mirror))
    if array is not None:
        refuse_if_in_use(primary, mirror, {export_backstore_name(mirror)})
    # CDP's stack before the array it sits on; its data and points stay on the mirror.
    actions += deactivation_actions(mirror, primary)
    if array is not None:
        actions.append(
            stop_array_action(
                primary.name, mirror.md_device, f"{array.kernel_name}; the legs keep their data"
            )
        )
    actions += logout_actions(profile, mirror, primary)
    for replica in mirror.replicas:
        actions += leg_export_removal(profile, mirror, replica, facts[replica.site], primary.initiator or "")
    # Caches last, once nothing uses them: drained (never dropped dirty), then removed. A leg's
    # own points stack is taken down where this host keeps it (its points and the leg's data
    # stay on its disk); another site's stays up: only that site's operator takes it down.
    notes: list[str] = []
    legs = mirror.legs
    for leg in legs:
        site = facts[leg.site]
        if leg.points is not None and profile.sites[leg.site].is_local:
            actions += points_deactivation(mirror, leg, site)
        elif leg.points is not None and points_deactivation(mirror, leg, site):
            notes.append(
                f"site {leg.site} keeps its points of {mirror.name} up ({points_volume(mirror, leg.site)}"
                f" on {leg.disk}): only its operator takes them down there, with"
                f" `remirror cdp down PROFILE {mirror.name} --leg`"
            )
        name = cache_name(mirror, leg.site)
        if name in site.dm:
            disk = site.disks.get(leg.disk, DiskFacts(leg.disk, exists=False))
            try:
                actions += removal_actions(site, site.dm[name], disk, name, remove=True)
            except CacheError as error:
                raise PlanError(str(error)) from None
    involved = set(mirror.sites)
    conf = [a for a in mdadm_conf_actions(profile, facts, without=mirror) if a.site in involved]
    return Plan(tuple(with_mdadm_conf(actions, conf)), notes=tuple(notes))


def refuse_if_in_use(primary: SiteFacts, mirror: Mirror, ours: set[str]) -> None:
    """Stopping an array under a filesystem, a process or another export would lose writes.

    With CDP the users are the volume's (the stack itself holds the mirror: it goes first).
    """
    stack = stack_kernel_names(mirror, primary)
    users = []
    for path in [mirror.md_device, volume_path(mirror)]:
        device = primary.disks.get(path, DiskFacts(path, exists=False))
        users += [u for u in device.users() if u.removeprefix("held by ") not in stack]
    users += [
        f"exported by LIO backstore {name}"
        for name, dev in primary.backstores.items()
        if dev in (mirror.md_device, volume_path(mirror)) and name not in ours
    ]
    if users:
        raise PlanError(
            f"site {primary.name}: {mirror.md_device} is in use ({'; '.join(users)}): not stopping it"
        )
