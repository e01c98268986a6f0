"""Run the steps of a plan on this site, in order, stopping at the first failure.

A step is a small JSON object, so that the controller can ship it over SSH:
`run` (an argv), `wait_path` (for a udev link), `write_file` (atomic),
`write_sysfs`, `node_secrets` (CHAP secrets into an iSCSI node record) and
`lio` (an rtslib operation). Secrets arrive inside steps and are redacted
wherever a step is logged or reported.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from remirror.errors import CommandError, RemirrorError
from remirror.files import write_atomically
from remirror.runner.base import redact
from remirror.runner.local import LocalRunner

log = logging.getLogger("remirror.agent")
_runner = LocalRunner("agent")


def run_steps(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Execute steps in order; one result per step attempted."""
    results: list[dict[str, Any]] = []
    for step in steps:
        secrets = step.get("secrets", [])
        try:
            _STEPS[step["kind"]](step)
            results.append({"ok": True})
        except Exception as error:  # noqa: BLE001 - every failure is reported to the controller
            message = (
                error.one_line() if isinstance(error, RemirrorError) else f"{type(error).__name__}: {error}"
            )
            results.append({"ok": False, "error": redact(message, secrets)})
            break
    return results


def _run(step: dict[str, Any]) -> None:
    try:
        _runner.run(
            step["argv"],
            secrets=step.get("secrets", []),
            timeout=float(step.get("timeout", 120)),
            ok_codes=step.get("ok_codes", [0]),
        )
    except CommandError as error:
        # A known exit code gets the planner's explanation in front of the tool's words.
        explanation = step.get("explain", {}).get(str(error.returncode))
        if explanation:
            raise RemirrorError(f"{explanation}: {error.stderr_tail}") from None
        raise


def _write_sysfs(step: dict[str, Any]) -> None:
    # sysfs attributes take one write of the whole value: no temp file, no rename.
    Path(step["path"]).write_text(step["value"])


def _node_secrets(step: dict[str, Any]) -> None:
    """Put CHAP secrets into an iSCSI node record by editing its file.

    `iscsiadm -o update -v SECRET` would show the secret to every user of
    this host in `ps` for as long as it runs; iscsiadm keeps the record as
    `key = value` lines in a root-only file, which it rereads at each login.
    """
    from remirror.agent.observe import ISCSI_NODES, node_record_files

    base = ISCSI_NODES / step["target"]
    portal = f"{step['address']},{step['port']}"
    records = [*base.glob(f"{portal},*"), *([base / portal] if (base / portal).exists() else [])]
    files = [file for record in records for file in node_record_files(record)]
    if not files:
        raise RemirrorError(f"no iSCSI node record for {step['target']} at {step['address']}:{step['port']}")
    for file in files:
        lines = file.read_text().splitlines()
        values = dict(step["values"])
        for i, line in enumerate(lines):
            key = line.partition(" = ")[0].strip()
            if key in values:
                lines[i] = f"{key} = {values.pop(key)}"
        end = next((i for i, line in enumerate(lines) if line.startswith("# END RECORD")), len(lines))
        lines[end:end] = [f"{key} = {value}" for key, value in values.items()]
        _write_file({"path": str(file), "content": "\n".join(lines) + "\n", "mode": 0o600})


def _wait_path(step: dict[str, Any]) -> None:
    deadline = time.monotonic() + float(step.get("timeout", 60))
    while not Path(step["path"]).exists():
        if time.monotonic() > deadline:
            raise RemirrorError(f"{step['path']} did not appear within {step.get('timeout', 60)}s")
        _runner.run(["udevadm", "settle", "--timeout=5"], ok_codes=(0, 1))
        time.sleep(0.2)


def _write_file(step: dict[str, Any]) -> None:
    write_atomically(step["path"], step["content"], int(step.get("mode", 0o644)))


def _lio(step: dict[str, Any]) -> None:
    from rtslib_fb import (  # imported here: only sites that run LIO need it
        LUN,
        TPG,
        BlockStorageObject,
        FabricModule,
        MappedLUN,
        NetworkPortal,
        NodeACL,
        RTSRoot,
        Target,
    )

    op = step["op"]
    if op == "save":
        Path(step["path"]).parent.mkdir(parents=True, exist_ok=True)
        RTSRoot().save_to_file(step["path"])  # rtslib writes it 0600, temp file + rename
        return
    if op == "create_backstore":
        BlockStorageObject(step["name"], dev=step["dev"])
        return
    if op == "delete_backstore":
        # Only the LIO object: the disk and its data stay as they are.
        BlockStorageObject(step["name"]).delete()
        return
    if op == "delete_target":
        # Deletes its TPGs with their portals, LUNs and ACLs.
        Target(FabricModule("iscsi"), step["iqn"], mode="lookup").delete()
        return
    target = Target(FabricModule("iscsi"), step["iqn"], mode="create" if op == "create_target" else "lookup")
    tpg = TPG(target, 1, mode="create" if op == "create_target" else "lookup")
    if op == "create_target":
        tpg.set_attribute("authentication", "1" if step["chap"] else "0")
        tpg.set_attribute("generate_node_acls", "0")
        tpg.enable = True
    elif op == "create_portal":
        NetworkPortal(tpg, step["address"], int(step["port"]), mode="create")
    elif op == "create_lun":
        so = next(s for s in RTSRoot().storage_objects if s.name == step["backstore"])
        LUN(tpg, int(step["lun"]), so)
    elif op == "set_acl":
        acl = NodeACL(tpg, step["initiator"], mode="any")
        if not any(m.mapped_lun == 0 for m in acl.mapped_luns):
            MappedLUN(acl, 0, int(step["lun"]))
        chap = step.get("chap")
        if chap:
            acl.chap_userid, acl.chap_password = chap["username"], chap["password"]
            if chap.get("mutual_username"):
                acl.chap_mutual_userid = chap["mutual_username"]
                acl.chap_mutual_password = chap["mutual_password"]
    else:
        raise RemirrorError(f"unknown LIO operation {op!r}")


_STEPS = {
    "run": _run,
    "wait_path": _wait_path,
    "node_secrets": _node_secrets,
    "write_file": _write_file,
    "write_sysfs": _write_sysfs,
    "lio": _lio,
}
