"""iSCSI session timeouts: the `lan` and `wan` presets and custom mappings.

Two separate questions decide an initiator's node settings:

* How the link behaves (`iscsi.timeouts`). `lan` keeps open-iscsi's defaults.
  `wan` follows the seed capstone (Aristizabal 2008, section 4): on a 1 Mbit /
  25 ms link the default NOP-Out interval/timeout (5 s / 5 s here, 10/15 s in
  the paper's release) dropped sessions within two hours, because a NOP reply
  waits behind megabytes of queued writes; with longer NOP timeouts and a
  deeper command queue (cmds_max 1024, queue_depth 128) the same link ran for
  18 hours. We keep NOP pings on (the paper's 1000/1500 s effectively turns
  them off, so a dead link would go unnoticed for half an hour) but give a
  reply 30 s to arrive.

* What a lost link should do to the mirror (`replication.on_link_loss`).
  `degrade` sets a short replacement timeout: once the connection is declared
  dead, queued commands fail after 5 s, md marks the remote leg faulty and
  the application's writes go on (the bitmap records what the leg missed).
  Verified in the lab: with the `lan` preset a write stalls about 9-15 s, then
  continues. `wait` sets a replacement timeout of a day: commands queue in
  the iSCSI layer until the link returns, the leg never fails, and the
  application blocks for as long as the outage lasts.

A custom mapping replaces the preset: its keys are iscsiadm node keys and are
merged over the `lan` values. Keys that remirror manages itself (CHAP,
`node.startup`) cannot be set there, nor can the replacement timeout: it is
`on_link_loss`'s, and a mapping that set it would quietly turn `degrade`
into `wait` (or the reverse).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

OnLinkLoss = Literal["degrade", "wait"]

NOOP_INTERVAL = "node.conn[0].timeo.noop_out_interval"
NOOP_TIMEOUT = "node.conn[0].timeo.noop_out_timeout"
REPLACEMENT_TIMEOUT = "node.session.timeo.replacement_timeout"
CMDS_MAX = "node.session.cmds_max"
QUEUE_DEPTH = "node.session.queue_depth"

PRESETS: Mapping[str, Mapping[str, str]] = {
    "lan": {NOOP_INTERVAL: "5", NOOP_TIMEOUT: "5", CMDS_MAX: "128", QUEUE_DEPTH: "32"},
    "wan": {NOOP_INTERVAL: "10", NOOP_TIMEOUT: "30", CMDS_MAX: "1024", QUEUE_DEPTH: "128"},
}

REPLACEMENT_FOR: Mapping[OnLinkLoss, str] = {
    "degrade": "5",
    "wait": "86400",
}

# Keys a custom mapping may not set: remirror owns them (secrets come from
# files; node.startup stays manual so that boot never brings a remote leg, see
# docs/safety.md).
RESERVED_PREFIXES = ("node.session.auth.", "node.conn[0].auth.", "node.startup", "node.discovery")


def is_reserved_key(key: str) -> bool:
    """Whether remirror manages this iscsiadm key itself."""
    return key.startswith(RESERVED_PREFIXES)


def node_settings(timeouts: str | Mapping[str, str], on_link_loss: OnLinkLoss) -> dict[str, str]:
    """The iscsiadm node keys and values for a preset name or custom mapping."""
    preset = timeouts if isinstance(timeouts, str) else "lan"
    settings = {**PRESETS[preset], REPLACEMENT_TIMEOUT: REPLACEMENT_FOR[on_link_loss]}
    if not isinstance(timeouts, str):
        settings.update(timeouts)
    return settings
