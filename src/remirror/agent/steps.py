"""Run the steps of a plan on this site, in order, stopping at the first failure.

A step arrives as a small JSON object and is read back into its class of the
protocol's catalogue (remirror.protocol) before anything runs; each handler
here builds its argv, table and paths from the typed fields. The steps: the
commands (remirror.protocol.commands: mdadm, iscsiadm, dmsetup, the cache-head
dd, each argv built here), the LIO operations (remirror.agent.lio_steps),
`wait_path` (for a udev link), `mdadm_conf` (remirror's block of mdadm.conf,
written atomically), `md_attribute` (an array's sysfs attribute, the array
named by its device), `session_timeout` (a live session's replacement
time-out), `member_state` (an md member's sysfs state, the member named by its
device path), `disk_sysfs` (a block device's scheduler), `local_leg_last` (the
local leg of an array into its last slot, remirror.agent.md_slots),
`add_replica_legs` and `drop_bad_block_log` (replica legs without md's bad
block log, remirror.agent.md_legs), `node_secrets` (CHAP secrets into an iSCSI
node record), `dm_reload` (a live table swap), `drain_cache` (write a cache
back, then swap it for a linear mapping), `cdp_stack` and `cdp_deactivate` (a
mirror's CDP stack, remirror.agent.cdp), `assemble_array` (md's assemble, past
what udev's incremental assembly took meanwhile), `leg_record_create`,
`leg_record_promote` and `leg_record_join` (generations on the legs) and
`save_ranges` (a discarded leg's writes, kept aside),
remirror.agent.generations; `wireguard_key` and `wireguard_tunnel`
(`transport: wireguard`, remirror.agent.wireguard). Secrets arrive inside
steps and are redacted wherever a step is logged or reported.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from remirror.agent import cdp, generations, md_legs, md_slots, seed, wireguard
from remirror.agent.direct import first_nonzero
from remirror.agent.lio_steps import LIO_HANDLERS
from remirror.agent.policy import devno_name
from remirror.errors import CommandError, RemirrorError
from remirror.facts.dm import parse_cache_status
from remirror.facts.mdadm_conf import merged_conf
from remirror.facts.model import CacheStatus
from remirror.files import write_atomically
from remirror.protocol import Step, decode
from remirror.protocol import steps as catalogue
from remirror.protocol.commands import COMMANDS, Command
from remirror.runner.base import redact
from remirror.runner.local import LocalRunner

log = logging.getLogger("remirror.agent")
_runner = LocalRunner("agent")


def run_steps(steps: list[Any]) -> list[dict[str, Any]]:
    """Execute steps (JSON objects of the protocol) in order; one result per step attempted."""
    results: list[dict[str, Any]] = []
    secrets = secrets_of(steps)  # every step's, for every step's error: one may quote another's
    for obj in steps:
        try:
            step = decode(obj)
            _STEPS[type(step)](step)
            results.append({"ok": True})
        except Exception as error:  # noqa: BLE001 - every failure is reported to the controller
            message = (
                error.one_line() if isinstance(error, RemirrorError) else f"{type(error).__name__}: {error}"
            )
            results.append({"ok": False, "error": redact(message, secrets)})
            break
    return results


def secrets_of(steps: Any) -> list[str]:
    """The secrets the steps of a request carry, as sent (malformed steps are refused by decode,
    later): what their results and any error of the request are redacted of."""
    listed = [obj.get("secrets") for obj in steps if isinstance(obj, dict)] if isinstance(steps, list) else []
    return [s for each in listed if isinstance(each, list) for s in each if isinstance(s, str)]


def _command(step: Command) -> None:
    """A command of the catalogue, its argv built here from its checked fields."""
    try:
        _runner.run(list(step.argv()), timeout=step.TIMEOUT, ok_codes=step.ok_codes)
    except CommandError as error:
        # A known exit code gets the planner's explanation in front of the tool's words.
        explanation = step.explain.get(error.returncode) if error.returncode is not None else None
        if explanation:
            raise RemirrorError(f"{explanation}: {error.stderr_tail}") from None
        raise


def _kernel_name(path: str) -> str:
    """The kernel's name of block device `path`, from its device number. Never from the path's
    file name: a path that is not there (an array this site has not assembled) would name
    whatever device has that name here (`/dev/md/md0` at a DR site: its own system RAID)."""
    try:
        found = Path(path).stat()
    except OSError as error:
        raise RemirrorError(f"{path} is not there") from error
    block = stat.S_ISBLK(found.st_mode)
    name = devno_name(f"{os.major(found.st_rdev)}:{os.minor(found.st_rdev)}") if block else None
    if name is None:
        raise RemirrorError(f"{path} is not a block device")
    return name


def _array_name(path: str) -> str:
    name = _kernel_name(path)
    if not Path(f"/sys/block/{name}/md").is_dir():
        raise RemirrorError(f"{path} is not an md array")
    return name


def _member_state(step: catalogue.SetMemberState) -> None:
    md, member = _array_name(step.md), _kernel_name(step.device)
    _write_attribute(Path(f"/sys/block/{md}/md/dev-{member}/state"), step.value)


def _disk_sysfs(step: catalogue.WriteDiskSysfs) -> None:
    _write_attribute(Path(f"/sys/class/block/{_kernel_name(step.device)}/{step.attribute}"), step.value)


def _md_attribute(step: catalogue.SetMdAttribute) -> None:
    _write_attribute(Path(f"/sys/block/{_array_name(step.md)}/md/{step.attribute}"), step.value)


def _session_timeout(step: catalogue.SetSessionTimeout) -> None:
    """The session's replacement time-out, once it is seen logged in to the target named: a
    session number is the kernel's, and another login may have taken it since the plan."""
    session = Path(f"/sys/class/iscsi_session/session{step.session}")
    target = (session / "targetname").read_text().strip() if (session / "targetname").exists() else ""
    if target != step.target:
        raise RemirrorError(f"iSCSI session {step.session} is not logged in to {step.target}: plan again")
    _write_attribute(session / "recovery_tmo", str(step.seconds))


def _write_attribute(path: Path, value: str) -> None:
    # sysfs attributes take one write of the whole value: no temp file, no rename.
    path.write_text(value)


def _node_secrets(step: catalogue.NodeSecrets) -> None:
    """Put CHAP secrets into an iSCSI node record by editing its file.

    `iscsiadm -o update -v SECRET` would show the secret to every user of
    this host in `ps` for as long as it runs; iscsiadm keeps the record as
    `key = value` lines in a root-only file, which it rereads at each login.
    """
    from remirror.agent.observe import ISCSI_NODES, node_record_files

    base = ISCSI_NODES / step.target
    portal = f"{step.address},{step.port}"
    records = [*base.glob(f"{portal},*"), *([base / portal] if (base / portal).exists() else [])]
    # Only a record of this target's, after resolution (the policy checks the fields whole).
    home = Path(os.path.realpath(base))
    if home.parent != Path(os.path.realpath(ISCSI_NODES)):
        raise RemirrorError(f"{step.target!r} is not a target of {ISCSI_NODES}")
    records = [r for r in records if Path(os.path.realpath(r)).parent == home]
    files = [file for record in records for file in node_record_files(record)]
    if not files:
        raise RemirrorError(f"no iSCSI node record for {step.target} at {step.address}:{step.port}")
    for file in files:
        lines = file.read_text().split("\n")  # iscsiadm's own line breaks: no other counts as one
        if lines and lines[-1] == "":
            lines.pop()
        values = dict(step.values)
        for i, line in enumerate(lines):
            key = line.partition(" = ")[0].strip()
            if key in values:
                lines[i] = f"{key} = {values.pop(key)}"
        end = next((i for i, line in enumerate(lines) if line.startswith("# END RECORD")), len(lines))
        lines[end:end] = [f"{key} = {value}" for key, value in values.items()]
        write_atomically(str(file), "\n".join(lines) + "\n", 0o600)


def _wait_path(step: catalogue.WaitPath) -> None:
    deadline = time.monotonic() + step.timeout
    while not Path(step.path).exists():
        if time.monotonic() > deadline:
            raise RemirrorError(f"{step.path} did not appear within {step.timeout:g}s")
        _runner.run(["udevadm", "settle", "--timeout=5"], ok_codes=(0, 1))
        time.sleep(0.2)


def _assemble_array(step: catalogue.AssembleArray) -> None:
    """`mdadm --assemble --run` of `devices` into `md` (array `uuid`).

    A leg that appears in the middle of a plan (an iSCSI login) is taken at
    once by udev's incremental assembly into an inactive array, and `mdadm
    --assemble` then skips it as busy (seen in the lab). What incremental
    assembly builds stays inactive until every leg is there: it never ran
    and holds no write, so it is stopped (the planner's
    `release_partial_assembly` does the same for what it saw before the
    plan). An array udev did start from every leg is the array wanted.
    """
    _runner.run(["udevadm", "settle", "--timeout=10"], ok_codes=(0, 1))
    wanted = {Path(os.path.realpath(device)).name for device in step.devices}
    for md in sorted(Path("/sys/block").glob("md*")):
        members = {p.name for p in (md / "slaves").iterdir()} if (md / "slaves").is_dir() else set()
        if not members & wanted:
            continue
        state = (md / "md" / "array_state").read_text().strip()
        if state == "inactive":
            _runner.run(["mdadm", "--stop", f"/dev/{md.name}"])
        elif Path(step.md).exists() and Path(os.path.realpath(step.md)).name == md.name:
            return
    update = ["--update=bbl"] if step.bad_block_log else []
    argv = ["mdadm", "--assemble", step.md, f"--uuid={step.uuid}", "--run", *update, *step.devices]
    _runner.run(argv, timeout=120)


_CONF_LINE = re.compile(r"[!-~]+( [!-~]+)*")


def _mdadm_conf(step: catalogue.MdadmConfArrays) -> None:
    """remirror's block of mdadm.conf with the step's lines, and the lines of it they do not name
    (a dropped mirror's: only a person removes one); the rest of the file as it is."""
    from remirror.facts import parsers  # MDADM_CONF read at each step: tests point it elsewhere

    path = Path(parsers.MDADM_CONF)
    current = path.read_text() if path.exists() else ""
    lines = [line.text() for line in step.arrays]
    if not all(_CONF_LINE.fullmatch(line) for line in lines):  # one line of words, whatever the check took
        raise RemirrorError("mdadm_conf: a line that is not one line of printable words")
    write_atomically(str(path), merged_conf(current, lines), 0o644)


def _dm_reload(step: catalogue.DmReload) -> None:
    """Swap a device's table live: load the new one, then resume (dm suspends the old one first)."""
    _runner.run(["dmsetup", "load", step.name, "--table", step.table.text()])
    _runner.run(["dmsetup", "resume", step.name])


def _cache_status(name: str) -> CacheStatus:
    return parse_cache_status(_runner.run(["dmsetup", "status", name]).stdout)


# Seconds without progress after which a writecache drain is started again (see below).
KICK_AFTER = 2.0


def _drain_cache(step: catalogue.DrainCache) -> None:
    """Write a cache back until nothing is dirty, then swap in a linear mapping of its disk.

    The last check is made with the device suspended (no write can come in
    between), with the linear table already loaded: only a clean cache
    without errors is swapped out; otherwise the cache is resumed as it was
    and the step fails. A drain cut short stays in cleaner mode (its table
    says so; new writes bypass the cache) until a later apply finishes the
    drain, or ends cleaner mode if the profile keeps the cache.
    """
    name = step.name
    if step.cleaner_table is not None:  # None: already draining
        _dm_reload(catalogue.DmReload(name, step.cleaner_table))
    if step.target == "writecache":
        # Whatever is written between the last check and the swap goes back at the suspend.
        _runner.run(["dmsetup", "message", name, "0", "flush_on_suspend"])
        _runner.run(["dmsetup", "message", name, "0", "cleaner"])  # starts the writeback (below)
    deadline = time.monotonic() + step.timeout
    kicked, least = 0.0, -1
    while True:
        status = _cache_status(name)
        if step.target == "writecache" and status.dirty and (least < 0 or status.dirty < least):
            least = status.dirty
        elif step.target == "writecache" and status.dirty and time.monotonic() - kicked > KICK_AFTER:
            # Found in the lab (kernel 6.1): cleaner mode set by a table reload writes
            # back one batch and stops until something starts writeback again; the
            # `cleaner` message does (it re-checks the watermarks). So while the dirty
            # count stands still, send it.
            _runner.run(["dmsetup", "message", name, "0", "cleaner"])
            kicked = time.monotonic()
        if status.error:
            raise RemirrorError(
                f"cache {name} reports error {status.error}: not removing it (its data stays on it)"
            )
        if status.clean:
            break
        if time.monotonic() > deadline:
            raise RemirrorError(
                f"cache {name} still holds {status.dirty} dirty block(s) after {step.timeout:g}s:"
                " left in cleaner mode; apply again to finish the drain (or with the cache to keep it)"
            )
        time.sleep(0.5)
    _runner.run(["dmsetup", "load", name, "--table", step.linear.text()])
    _runner.run(["dmsetup", "suspend", name])
    status = _cache_status(name)
    if status.error or not status.clean:
        _runner.run(["dmsetup", "clear", name])  # drop the linear table: the cache stays
        _runner.run(["dmsetup", "resume", name])
        raise RemirrorError(
            f"cache {name} was not clean when suspended ({status.dirty} dirty, error {status.error}):"
            " not removed; apply again"
        )
    _runner.run(["dmsetup", "resume", name])


def _prove_blank(step: catalogue.ProveBlank) -> None:
    at = first_nonzero(step.device)
    if at is not None:
        raise RemirrorError(
            f"{step.device} is not blank: byte {at} is not zero, so initial_sync: skip would leave"
            " the legs different; zero it (blkdiscard --zeroout) or use initial_sync: full"
        )


# Each step of the catalogue, its handler (a unit test holds the two together).
_STEPS: dict[type[Step], Callable[[Any], None]] = {
    **dict.fromkeys(COMMANDS, _command),
    catalogue.ProveBlank: _prove_blank,
    catalogue.CopySpans: seed.copy_spans,
    catalogue.DeviceUnwritten: seed.device_unwritten,
    catalogue.WaitPath: _wait_path,
    catalogue.AssembleArray: _assemble_array,
    catalogue.NodeSecrets: _node_secrets,
    catalogue.MdadmConfArrays: _mdadm_conf,
    catalogue.SetMdAttribute: _md_attribute,
    catalogue.SetSessionTimeout: _session_timeout,
    catalogue.SetMemberState: _member_state,
    catalogue.WriteDiskSysfs: _disk_sysfs,
    catalogue.LocalLegLast: md_slots.local_leg_last,
    catalogue.AddReplicaLegs: md_legs.add_replica_legs,
    catalogue.DropBadBlockLog: md_legs.drop_bad_block_log,
    **LIO_HANDLERS,  # remirror.agent.lio_steps
    catalogue.DmReload: _dm_reload,
    catalogue.DrainCache: _drain_cache,
    catalogue.CdpStack: cdp.ensure_stack,
    catalogue.LegRecordCreate: generations.create_step,
    catalogue.LegRecordPromote: generations.promote_step,
    catalogue.LegRecordJoin: generations.join_step,
    catalogue.SaveRanges: generations.save_ranges_step,
    catalogue.CdpDeactivate: cdp.deactivate_step,
    catalogue.WireguardKey: wireguard.make_key_step,
    catalogue.WireguardTunnel: wireguard.tunnel_step,
}
