"""Actions: one change on one site, with the steps that make it.

A plan is an ordered list: an action's dependencies come before it (on the
replica site the backstore before the target before the ACL; then on the
primary the node record before the login before the array). Apply runs
them in order and stops at the first failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from remirror.errors import Refusal, RemirrorError
from remirror.protocol.steps import Step

CREATE, CHANGE, DELETE = "+", "~", "-"


class PlanError(RemirrorError):
    """The sites are in a state the plan cannot reconcile (a missing disk, a name taken by something else)."""

    reason = "cannot_plan"


class MissingDisks(PlanError):
    """Disks the profile names that a site does not have (or has too small to use): all of them
    at once, one line each."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(self.problems))

    def one_line(self) -> str:
        # One line per disk: an editor can jump to each file:line:col.
        return str(self)

    def details(self) -> dict[str, Any]:
        return {"problems": list(self.problems)}


class SplitBrain(PlanError, Refusal):
    """Legs of a mirror ran apart and took writes each: remirror waits for `resolve`."""

    reason = "split_brain"

    def __init__(self, mirror: str, why: str) -> None:
        self.mirror = mirror
        super().__init__(f"mirror {mirror} is in split brain: {why}")

    def details(self) -> dict[str, Any]:
        return {"mirror": self.mirror}


class Verb(StrEnum):
    """What an action does; the plan shows it, the reconciler and the CLI compare against it."""

    ACTIVATE_CDP = "ActivateCdp"
    ACTIVATE_POINTS = "ActivatePoints"
    ADD_CACHE = "AddCache"
    ASSEMBLE_ARRAY = "AssembleArray"
    CATCH_UP_SEED = "CatchUpSeed"
    CHANGE_BITMAP = "ChangeBitmap"
    CLEAR_WRITE_MOSTLY = "ClearWriteMostly"
    CREATE_ARRAY = "CreateArray"
    CREATE_BACKSTORE = "CreateBackstore"
    CREATE_CACHE = "CreateCache"
    CREATE_CDP = "CreateCdp"
    CREATE_ISCSI_NODE = "CreateIscsiNode"
    CREATE_LUN = "CreateLun"
    CREATE_NODE_ACL = "CreateNodeAcl"
    CREATE_POINTS = "CreatePoints"
    CREATE_PORTAL = "CreatePortal"
    CREATE_TARGET = "CreateTarget"
    DEACTIVATE_CDP = "DeactivateCdp"
    DEACTIVATE_POINTS = "DeactivatePoints"
    DELETE_BACKSTORE = "DeleteBackstore"
    DELETE_ISCSI_NODE = "DeleteIscsiNode"
    DELETE_TARGET = "DeleteTarget"
    DRAIN_CACHE = "DrainCache"
    DROP_BAD_BLOCK_LOG = "DropBadBlockLog"
    FENCE_TARGET = "FenceTarget"
    FORGET_ARRAY = "ForgetArray"
    LOGIN_AFRESH = "LoginAfresh"
    LOGIN_SESSION = "LoginSession"
    LOGOUT_SESSION = "LogoutSession"
    MAKE_TUNNEL_KEY = "MakeTunnelKey"
    PROVE_BLANK = "ProveBlank"
    RE_ADD_LEG = "ReAddLeg"
    REBUILD_LEG = "RebuildLeg"
    RECORD_GENERATION = "RecordGeneration"
    REMOVE_CACHE_DEVICE = "RemoveCacheDevice"
    RELEASE_RESYNCS = "ReleaseResyncs"
    REORDER_LEGS = "ReorderLegs"
    RESUME_WRITES = "ResumeWrites"
    RESUME_RESYNC = "ResumeResync"
    SAVE_LIO_CONFIG = "SaveLioConfig"
    SAVE_RANGES = "SaveRanges"
    SET_SCHEDULER = "SetScheduler"
    SET_SESSION_TIMEOUT = "SetSessionTimeout"
    SET_TUNNEL = "SetTunnel"
    SET_TARGET_PARAMETERS = "SetTargetParameters"
    SET_WRITE_BEHIND = "SetWriteBehind"
    SET_RESYNC_LIMIT = "SetResyncLimit"
    SET_SAFE_MODE = "SetSafeMode"
    SET_WRITE_MOSTLY = "SetWriteMostly"
    STOP_ARRAY = "StopArray"
    STOP_CHECK = "StopCheck"
    TUNE_CACHE = "TuneCache"
    UPDATE_ISCSI_NODE = "UpdateIscsiNode"
    UPDATE_NODE_ACL = "UpdateNodeAcl"
    WRITE_LEG_RECORDS = "WriteLegRecords"
    WRITE_MDADM_CONF = "WriteMdadmConf"


@dataclass(frozen=True)
class Action:
    """A change on one site: `+ site-b CreateBackstore lab-lab0 on /dev/lab/b0`."""

    site: str
    verb: Verb
    subject: str
    symbol: str = CREATE
    steps: tuple[Step, ...] = field(default=(), compare=False)
    destructive: str = ""  # what it would destroy; empty when nothing
    # The reconciler may carry it out on its own (remirror.plan.repair): decided
    # where the action is built, so that a new verb is apply's alone until someone
    # decides a daemon may run it. Only re-creating what apply made, never what
    # assembles, rebuilds, reshapes, removes or stops.
    repair: bool = False
    # The iSCSI target (IQN) an LIO or initiator action is about: what the reconciler
    # matches sessions and targets on.
    target: str = ""

    def line(self) -> str:
        """One line for `remirror plan`."""
        warning = f"  [DESTROYS: {self.destructive}]" if self.destructive else ""
        return f"{self.symbol} {self.site}: {self.verb} {self.subject}{warning}"

    def as_json(self) -> dict[str, Any]:
        """The action as `-o json` shows it (steps omitted: they can hold secrets)."""
        return {
            "site": self.site,
            "verb": str(self.verb),
            "subject": self.subject,
            "symbol": self.symbol,
            "destructive": self.destructive or None,
        }


@dataclass(frozen=True)
class Plan:
    """The ordered actions that make the sites match the profile."""

    actions: tuple[Action, ...]
    # What this plan cannot plan yet, for want of what its actions make (remirror.plan.tunnel's
    # keys): apply plans it again once they have run.
    pending: str = ""
    # What the operator should know that no action of this plan does (a DR site's own points
    # that only its operator takes down): shown after the summary.
    notes: tuple[str, ...] = ()

    @property
    def is_empty(self) -> bool:
        """Nothing to do: the sites match the profile."""
        return not self.actions

    @property
    def destructive(self) -> tuple[Action, ...]:
        """Actions that would write over data."""
        return tuple(a for a in self.actions if a.destructive)

    def summary(self) -> str:
        """`Plan: 3 to add, 1 to change, 0 to remove.`"""
        counts = {
            symbol: sum(a.symbol == symbol for a in self.actions) for symbol in (CREATE, CHANGE, DELETE)
        }
        line = (
            f"Plan: {counts[CREATE]} to add, {counts[CHANGE]} to change, {counts[DELETE]} to remove."
            if self.actions
            # With notes (a mirror `start` held for apply, what a teardown leaves), the sites may
            # not match the profile: the notes say what is left.
            else "No changes."
            if self.notes
            else "No changes: the sites match the profile."
        )
        return f"{line} Then: {self.pending}." if self.pending else line
