"""md's safe mode on a mirror: how long an idle array waits before md marks it clean (pure).

md marks an array clean after `safe_mode_delay` without a write (0.2 s, set at each assembly and
kept in memory only), and the next write waits until md has written the superblock on every
leg to say it is dirty again (md_write_start): on a mirror, the replica's leg over the link, a
round trip and a remote disk write in front of the first write of every burst, in async mode
too. In the hosts' lab, replaying the bench's trace over the 14 ms WAN, md's 0.2 s cost the
replica 170 superblock writes for the trace's 188 (a mean write of 727 ms in the lab, against
465 ms with 10 s; docs/performance.md, "Beside DRBD").

What 10 s costs (md marks clean 10 to 20 s after the last write: md_write_end arms its timer at
the next multiple of the delay, plus the delay): a crash (a power cut) in that time finds the array marked
dirty, and md resyncs from the primary's leg the chunks its write-intent bitmap holds dirty
(those written in the last seconds; md clears a chunk's bit two of its daemon's 5 s passes
after the chunk's last write), where a crash of an array marked clean resyncs nothing. A
little more over the link after a crash, in the right direction, never less safe. After a
forced promotion, a leg whose superblock is not clean is held for a decision (remirror.roles,
docs/failover.md): a longer delay holds more such legs (an old primary idle for less than
that before the disaster, which 0.2 s would have let rejoin by the bitmap), never fewer.

Set where an array comes to be (create, assemble: remirror.plan.md_create, remirror.plan.md)
and put back by the reconciler wherever md was left with another value (an array assembled by
udev or mdadm at boot).
"""

from __future__ import annotations

from remirror.protocol.steps import SetMdAttribute

SAFE_MODE_DELAY = 10.0
_SHOWN = f"{SAFE_MODE_DELAY:g}"  # what the step writes, and the one value the agent takes


def safe_mode_step(md: str) -> SetMdAttribute:
    """The write of remirror's safe mode delay to array `md` (a device the site resolves)."""
    return SetMdAttribute(md, "safe_mode_delay", _SHOWN)


def safe_mode_is_set(seconds: float) -> bool:
    """Whether md's delay is remirror's (md prints it in its ticks: 10.000)."""
    return abs(seconds - SAFE_MODE_DELAY) < 0.05
