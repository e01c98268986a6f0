"""Plan the primary's iSCSI initiator: node records, logins, live timeouts. Pure: no I/O.

The primary logs in to each replica leg's target with open-iscsi. Node
settings are written with `iscsiadm -o update`, CHAP secrets into the node
record's file instead (a NodeSecrets step): iscsiadm's argv is visible in
`ps` to every user of the host.
"""

from __future__ import annotations

from collections.abc import Mapping

from remirror.facts.model import secret_digest
from remirror.facts.site import SiteFacts
from remirror.plan.actions import CHANGE, CREATE, DELETE, Action, Verb
from remirror.profile.model import Chap, Mirror, Profile
from remirror.profile.names import by_path
from remirror.profile.timeouts import REPLACEMENT_TIMEOUT, TRANSPORT_KEYS, node_record
from remirror.profile.types import Portal
from remirror.profile.wireguard import replica_portal
from remirror.protocol.commands import IscsiNode, IscsiNodeUpdate, NodeOp
from remirror.protocol.steps import (
    ISCSI_ERR_LOGIN_AUTH_FAILED,
    ISCSI_ERR_NO_OBJS_FOUND,
    ISCSI_ERR_SESS_EXISTS,
    NodeSecrets,
    SetSessionTimeout,
    Step,
    WaitPath,
    WriteDiskSysfs,
)


def node_step(
    iqn: str,
    portal: Portal,
    op: NodeOp,
    ok_codes: tuple[int, ...] = (0,),
    explain: Mapping[int, str] | None = None,
) -> IscsiNode:
    """`iscsiadm` on the node record of `iqn` at `portal`: `op` (new, delete, login, logout)."""
    return IscsiNode(iqn, portal.address, portal.port, op, ok_codes=ok_codes, explain=explain or {})


def logout_step(iqn: str, portal: Portal) -> IscsiNode:
    """End the session to `iqn` at `portal`; none there is "already so"."""
    return node_step(iqn, portal, "logout", ok_codes=(0, ISCSI_ERR_NO_OBJS_FOUND))


def logout_actions(profile: Profile, mirror: Mirror, primary: SiteFacts) -> list[Action]:
    """The primary's sessions to the mirror's replicas end, and their node records go."""
    actions = []
    for replica in mirror.replicas:
        iqn = profile.replica_iqn(mirror, replica)
        portal = replica_portal(profile, mirror, replica)
        if primary.session_for(iqn, portal.address, portal.port) is not None:
            actions.append(
                Action(
                    primary.name,
                    Verb.LOGOUT_SESSION,
                    f"{iqn} at {portal}",
                    DELETE,
                    (logout_step(iqn, portal),),
                    target=iqn,
                )
            )
        if primary.node_for(iqn, portal.address, portal.port) is not None:
            delete = node_step(iqn, portal, "delete", ok_codes=(0, ISCSI_ERR_NO_OBJS_FOUND))
            actions.append(
                Action(
                    primary.name, Verb.DELETE_ISCSI_NODE, f"{iqn} at {portal}", DELETE, (delete,), target=iqn
                )
            )
    return actions


def scheduler_step(path: str) -> WriteDiskSysfs:
    """No I/O scheduler on a replica leg's iSCSI disk: requests go out in the order md sends
    them (mq-deadline, the kernel's choice for a single-queue disk, sorts waiting writes by
    sector), and the target has a scheduler of its own anyway."""
    return WriteDiskSysfs(path, "queue/scheduler", "none")


def _node_settings(
    mirror: Mirror, chap: Chap | None, secrets: Mapping[str, str]
) -> tuple[dict[str, str], list[str]]:
    """The node record remirror wants, and the secrets in it.

    `node.startup=manual`: boot never logs in to a replica leg (docs/safety.md, "Boot"). With
    the remote leg there at boot, udev's incremental assembly would put it together with the
    local leg before anyone judged them, and md keeps the leg with more events: after a split
    brain, one side's writes gone. remirror logs in itself (`watch`, `reconcile`, `apply`),
    after judging the legs.
    """
    settings = node_record(mirror.iscsi.timeouts, mirror.replication.on_link_loss, chap is not None)
    if chap is None:
        return settings, []
    settings["node.session.auth.username"] = chap.username
    settings["node.session.auth.password"] = secrets[chap.password_file]
    found = [secrets[chap.password_file]]
    if chap.mutual:
        settings["node.session.auth.username_in"] = chap.target_username
        settings["node.session.auth.password_in"] = secrets[chap.target_password_file]
        found.append(secrets[chap.target_password_file])
    return settings, found


def initiator_actions(
    mirror: Mirror,
    primary: SiteFacts,
    iqn: str,
    portal: Portal,
    chap: Chap | None,
    secrets: Mapping[str, str],
) -> list[Action]:
    """The node record of a replica's target `iqn` at `portal` (with `chap`, Profile.replica_chap)
    as the profile wants it, and a session to it."""
    actions = []
    path = by_path(portal, iqn)
    wanted, secret_values = _node_settings(mirror, chap, secrets)
    current = primary.node_for(iqn, portal.address, portal.port)

    def shown(key: str, value: str) -> str:
        return secret_digest(value) if ".auth.password" in key else value

    changed = {k: v for k, v in wanted.items() if current is None or current.get(k) != shown(k, v)}
    steps: list[Step] = []
    if current is None:
        steps.append(node_step(iqn, portal, "new"))
    # One iscsiadm for every setting: it takes any number of -n/-v pairs (open-iscsi 2.1.8,
    # seen in the lab), and under emulation each iscsiadm costs a quarter of a second.
    settings = {k: v for k, v in changed.items() if ".auth.password" not in k}
    if settings:
        steps.append(IscsiNodeUpdate(iqn, portal.address, portal.port, settings))
    passwords = {k: v for k, v in changed.items() if ".auth.password" in k}
    if passwords:
        # Not through iscsiadm's argv, which every user of the host can read in `ps`.
        steps.append(NodeSecrets(iqn, portal.address, portal.port, passwords, tuple(secret_values)))
    if steps:
        verb, symbol = (
            (Verb.CREATE_ISCSI_NODE, CREATE) if current is None else (Verb.UPDATE_ISCSI_NODE, CHANGE)
        )
        keys = ", ".join(k.removeprefix("node.") for k in changed)
        actions.append(
            Action(
                primary.name,
                verb,
                f"{iqn} at {portal} ({keys})",
                symbol,
                tuple(steps),
                repair=True,
                target=iqn,
            )
        )
    session = primary.session_for(iqn, portal.address, portal.port)
    logged_in = session is not None and session.state == "LOGGED_IN"
    # The replacement timeout (what `on_link_loss` chooses) is the one setting a
    # running session takes live, through sysfs. Any other change needs a new
    # login, and a logout fails the leg under md: so none is made for it alone.
    # node.startup only matters at boot, and the transport's keys (TRANSPORT_KEYS: TCP's
    # buffers) wait for the session's next login: no new login for them either.
    relogin = any(k not in (REPLACEMENT_TIMEOUT, "node.startup", *TRANSPORT_KEYS) for k in changed)
    # An async mirror's session that lets writes overtake each other (logged in to a target
    # restored with other parameters, say) leaves site B a torn copy after a disaster: it logs
    # in again, which costs the leg a bitmap resync (profile/timeouts.py, IN_ORDER_NODE).
    disordered = (
        session is not None
        and logged_in
        and mirror.replication.mode == "async"
        and not session.sends_writes_in_order
    )
    relogin = relogin or disordered
    if session is not None and logged_in and not relogin:
        timeout = wanted[REPLACEMENT_TIMEOUT]
        if session.recovery_tmo is not None and str(session.recovery_tmo) != timeout:
            actions.append(
                Action(
                    primary.name,
                    Verb.SET_SESSION_TIMEOUT,
                    f"session {session.sid} to {iqn}: replacement timeout {session.recovery_tmo}s"
                    f" -> {timeout}s, live",
                    CHANGE,
                    (SetSessionTimeout(session.sid, iqn, int(timeout)),),
                    repair=True,
                    target=iqn,
                )
            )
    if logged_in and not relogin and session is not None and session.scheduler not in ("none", ""):
        actions.append(
            Action(
                primary.name,
                Verb.SET_SCHEDULER,
                f"{path} ({session.scheduler} -> none: requests leave as md sent them)",
                CHANGE,
                (scheduler_step(path),),
                repair=True,
                target=iqn,
            )
        )
    if not logged_in or relogin:
        login: list[Step] = []
        if session is not None and (steps or disordered):
            # Node settings take effect at the next login.
            login.append(logout_step(iqn, portal))
        login.append(
            node_step(
                iqn,
                portal,
                "login",
                ok_codes=(0, ISCSI_ERR_SESS_EXISTS),
                explain={
                    ISCSI_ERR_LOGIN_AUTH_FAILED: f"CHAP authentication to target {iqn} at {portal}"
                    " was refused (check the CHAP secrets on both sites)"
                },
            )
        )
        login.append(WaitPath(path, 60))
        login.append(scheduler_step(path))
        actions.append(
            Action(
                primary.name,
                Verb.LOGIN_SESSION,
                f"{iqn} at {portal}",
                CREATE,
                tuple(login),
                repair=True,
                target=iqn,
            )
        )
    return actions
