"""Parsers of what open-iscsi and its kernel side show: the initiator name, a session's sysfs. Pure."""

from __future__ import annotations

import re

from remirror.facts.model import IscsiSession
from remirror.facts.parsers import ParseError


def parse_initiator_name(text: str) -> str:
    """The IQN from /etc/iscsi/initiatorname.iscsi."""
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key.strip() == "InitiatorName" and value.strip():
            return value.strip()
    raise ParseError("no InitiatorName= line in initiatorname.iscsi")


def _flag(text: str) -> bool | None:
    value = text.strip()
    return None if not value.isdigit() else value != "0"


def parse_scheduler(text: str) -> str:
    """The active one of a disk's `queue/scheduler` (`[mq-deadline] kyber none` -> `mq-deadline`)."""
    found = re.search(r"\[(\S+)\]", text)
    return found.group(1) if found else text.strip()


def build_iscsi_session(sid: int, sysfs: dict[str, str]) -> IscsiSession:
    """A session from its sysfs values: state, targetname, persistent_address/port, disk,
    recovery_tmo, what its login negotiated (initial_r2t, immediate_data, first_burst_len) and
    its disk's I/O scheduler."""
    burst = sysfs.get("first_burst_len", "").strip()
    try:
        return IscsiSession(
            sid=sid,
            target=sysfs["targetname"].strip(),
            address=sysfs.get("persistent_address", "").strip(),
            port=int(sysfs.get("persistent_port", "0").strip() or 0),
            state=sysfs["state"].strip(),
            disk=sysfs.get("disk", "").strip() or None,
            recovery_tmo=int(sysfs["recovery_tmo"]) if sysfs.get("recovery_tmo", "").strip() else None,
            initiator=sysfs.get("initiatorname", "").strip(),
            initial_r2t=_flag(sysfs.get("initial_r2t", "")),
            immediate_data=_flag(sysfs.get("immediate_data", "")),
            first_burst=int(burst) if burst.isdigit() else None,
            scheduler=parse_scheduler(sysfs.get("scheduler", "")),
        )
    except (KeyError, ValueError) as error:
        raise ParseError(f"iSCSI session {sid}: missing or bad {error}") from None
