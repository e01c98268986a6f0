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

Whatever the preset, the session is negotiated so that writes travel in the
order md sent them (`IN_ORDER_NODE`, `IN_ORDER_TARGET`): with LIO's defaults
(InitialR2T=Yes, an 8 KiB first burst) a write larger than 8 KiB waits a
round trip for the target's R2T while a smaller one sent after it goes
straight through, so on a WAN a 4 KiB journal commit can reach site B
before the journal blocks it commits. Without an initial R2T and with a
first burst as large as any write, each write's data follows its command on
the wire and LIO runs each write once its data is in: what site B has when
the link dies is a prefix of what was sent (docs/failover.md, "What async
mode gives"). It also spares every large write that round trip.

Whatever the preset, the session's TCP buffers are the kernel's to size
(`node.conn[0].tcp.window_size` 0: open-iscsi then sets none). open-iscsi's
default asks for 512 KiB, which Linux caps at `net.core.wmem_max` (208 KiB,
doubled: 416 KiB), and a buffer set by hand is never grown: at most 416 KiB
in flight whatever the link. On the bench's 1 Gbit/s, 14 ms WAN (1.75 MB
per round trip) that held sequential writes to the iSCSI disk alone to 0.17
of the disk (0.99 MB/s in the hosts' lab, `ss` showing `sndbuf_limited`);
with the kernel's autotuning (up to `tcp_wmem`'s 4 MiB) the same disk took
4.6 MB/s, and md in sync mode over it 4.4-4.6 (bench/peer.py, docs/performance.md).

A custom mapping replaces the preset: its keys are iscsiadm node keys and are
merged over the `lan` values. Keys that remirror manages itself (CHAP,
`node.startup`) cannot be set there, nor can the replacement timeout: it is
`on_link_loss`'s, and a mapping that set it would quietly turn `degrade`
into `wait` (or the reverse).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from remirror.facts.model import IN_ORDER_BURST

OnLinkLoss = Literal["degrade", "wait"]

NOOP_INTERVAL = "node.conn[0].timeo.noop_out_interval"
NOOP_TIMEOUT = "node.conn[0].timeo.noop_out_timeout"
REPLACEMENT_TIMEOUT = "node.session.timeo.replacement_timeout"
CMDS_MAX = "node.session.cmds_max"
QUEUE_DEPTH = "node.session.queue_depth"
TCP_WINDOW = "node.conn[0].tcp.window_size"
AUTOTUNED = "0"  # no SO_SNDBUF/SO_RCVBUF: the kernel's TCP autotuning sizes the buffers
# Keys that change only how a session carries its writes, not when it gives up nor who it is:
# a node record updated for them needs no login of its own, so the reconciler never fails a
# healthy leg over them (remirror.plan.initiator). A live session keeps what it logged in with,
# through reconnects after a link loss too (iscsid copies the record at the session's creation):
# it takes them at its next login from the record (a boot, a stop and start of the mirror).
TRANSPORT_KEYS = frozenset({TCP_WINDOW})
# What this version sets on every record whatever the profile says: a boot's start may bring a
# record to it (an upgrade's), never to another value of those keys (a profile edit, `apply`'s).
TRANSPORT_DEFAULTS: Mapping[str, str] = {TCP_WINDOW: AUTOTUNED}

PRESETS: Mapping[str, Mapping[str, str]] = {
    "lan": {NOOP_INTERVAL: "5", NOOP_TIMEOUT: "5", CMDS_MAX: "128", QUEUE_DEPTH: "32", TCP_WINDOW: AUTOTUNED},
    "wan": {
        NOOP_INTERVAL: "10",
        NOOP_TIMEOUT: "30",
        CMDS_MAX: "1024",
        QUEUE_DEPTH: "128",
        TCP_WINDOW: AUTOTUNED,
    },
}

BURST = str(IN_ORDER_BURST)
IN_ORDER_NODE: Mapping[str, str] = {
    "node.session.iscsi.InitialR2T": "No",
    "node.session.iscsi.ImmediateData": "Yes",
    "node.session.iscsi.FirstBurstLength": BURST,
    "node.session.iscsi.MaxBurstLength": BURST,
}
# The target's side of the same negotiation (LIO TPG parameters); the target's receive segment
# from LIO's 8 KiB to open-iscsi's 256 KiB, so a large write is not cut into many PDUs.
IN_ORDER_TARGET: Mapping[str, str] = {
    "InitialR2T": "No",
    "ImmediateData": "Yes",
    "FirstBurstLength": BURST,
    "MaxBurstLength": BURST,
    "MaxRecvDataSegmentLength": "262144",
}


REPLACEMENT_FOR: Mapping[OnLinkLoss, str] = {
    "degrade": "5",
    "wait": "86400",
}

# Keys a custom mapping may not set: remirror owns them (secrets come from
# files; node.startup stays manual so that boot never brings a remote leg, see
# docs/safety.md).
# The in-order keys too: a mapping that set InitialR2T would void what async mode promises.
RESERVED_PREFIXES = (
    "node.session.auth.",
    "node.conn[0].auth.",
    "node.startup",
    "node.discovery",
    *IN_ORDER_NODE,
)


def is_reserved_key(key: str) -> bool:
    """Whether remirror manages this iscsiadm key itself."""
    return key.startswith(RESERVED_PREFIXES)


def node_settings(timeouts: str | Mapping[str, str], on_link_loss: OnLinkLoss) -> dict[str, str]:
    """The iscsiadm node keys and values for a preset name or custom mapping."""
    preset = timeouts if isinstance(timeouts, str) else "lan"
    settings = {**PRESETS[preset], REPLACEMENT_TIMEOUT: REPLACEMENT_FOR[on_link_loss]}
    if not isinstance(timeouts, str):
        settings.update(timeouts)
    return {**settings, **IN_ORDER_NODE}


def node_record(timeouts: str | Mapping[str, str], on_link_loss: OnLinkLoss, chap: bool) -> dict[str, str]:
    """Every setting remirror makes in the node record of a replica's target but the CHAP user
    names and passwords: `node.startup` manual (docs/safety.md, "Boot"), the timeouts, CHAP on.
    The planner writes them (remirror.plan.initiator); the DR site allows no other
    (remirror.profile.scope, SiteScope.node_settings)."""
    settings = {"node.startup": "manual", **node_settings(timeouts, on_link_loss)}
    if chap:
        settings["node.session.auth.authmethod"] = "CHAP"
    return settings
