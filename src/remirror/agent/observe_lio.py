"""Observe LIO, the kernel's iSCSI target, through rtslib: what a site exports, to whom, how.

An observation reads it in a thread beside the rest (`read_beside`): rtslib's import and its
walk of configfs keep a CPU busy, half a second of a remote agent's first observe of a site that
runs a target under the lab's emulation, while the rest of an observation mostly waits for
wipefs and mdadm. Both only read.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from remirror.facts.model import secret_digest

if TYPE_CHECKING:
    from rtslib_fb import RTSRoot

# Where the installed target service restores LIO from at boot: Debian's rtslib-fb-targetctl, or upstream's.
LIO_SAVE_PATHS = ("/etc/rtslib-fb-target/saveconfig.json", "/etc/target/saveconfig.json")


def read_beside() -> Callable[[], dict[str, Any]]:
    """Start `read` in a thread; the function returned waits for what it read (or raises its error).

    A bare thread, not the controller's ThreadPoolExecutor: concurrent.futures would add about a
    quarter to what a remote agent imports at every command's start (11 ms of 42 on the host).
    """
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["lio"] = read()
        except BaseException as error:  # noqa: BLE001 - raised again in the caller's thread
            box["error"] = error

    thread = threading.Thread(target=run, name="observe-lio", daemon=True)
    thread.start()

    def result() -> dict[str, Any]:
        thread.join()
        if "error" in box:
            raise box["error"]
        found: dict[str, Any] = box["lio"]
        return found

    return result


def save_path() -> str:
    """Where this site's target service restores LIO from at boot (what `lio save` writes)."""
    for path in LIO_SAVE_PATHS:
        if Path(path).parent.is_dir():
            return path
    return LIO_SAVE_PATHS[1]


def keep_site_dbroot() -> None:
    """Have rtslib leave LIO's dbroot where this site's target service put it.

    rtslib-fb (PyPI, in remirror's venv) moves LIO's dbroot to /etc/target whenever it opens
    its root (as it does inside other calls too), and fails when that directory is missing. On
    a Debian site, Debian's own rtslib-fb-targetctl has set it to /etc/rtslib-fb-target and
    /etc/target does not exist: every agent request that touched LIO failed there (found by
    the hosts' lab's first install). The dbroot in use is kept when it is a directory; else the
    directory the target service restores from (`save_path`), which exists, is taken. Set on
    rtslib's class: an agent process serves one site.
    """
    from rtslib_fb import RTSRoot  # imported here: only sites that run LIO need it

    in_use = Path("/sys/kernel/config/target/dbroot")
    current = in_use.read_text().strip() if in_use.exists() else ""
    kept = current if current and Path(current).is_dir() else str(Path(save_path()).parent)
    RTSRoot._preferred_dbroot = kept


def site_root() -> RTSRoot:
    """rtslib's root of LIO, its dbroot left where the site keeps it (`keep_site_dbroot`)."""
    from rtslib_fb import RTSRoot

    keep_site_dbroot()
    return RTSRoot()


def read() -> dict[str, Any]:
    """LIO objects through rtslib; nothing when LIO is not loaded here."""
    if not Path("/sys/kernel/config/target").is_dir():
        return {"available": False}
    root = site_root()
    backstores = {
        so.name: {"plugin": so.plugin, "dev": getattr(so, "udev_path", "")} for so in root.storage_objects
    }
    targets: dict[str, Any] = {}
    for target in root.targets:
        if target.fabric_module.name != "iscsi":
            continue
        tpgs = {}
        for tpg in target.tpgs:
            acls = {}
            for acl in tpg.node_acls:
                acls[acl.node_wwn] = {
                    "chap_userid": acl.chap_userid,
                    "chap_password": secret_digest(acl.chap_password) if acl.chap_password else "",
                    "chap_mutual_userid": acl.chap_mutual_userid,
                    "chap_mutual_password": secret_digest(acl.chap_mutual_password)
                    if acl.chap_mutual_password
                    else "",
                    "mapped_luns": sorted(m.mapped_lun for m in acl.mapped_luns),
                    "logged_in": acl.session is not None,
                }
            tpgs[str(tpg.tag)] = {
                "enabled": bool(tpg.enable),
                "portals": sorted(f"{p.ip_address}:{p.port}" for p in tpg.network_portals),
                "luns": {str(lun.lun): lun.storage_object.name for lun in tpg.luns},
                "authentication": tpg.get_attribute("authentication"),
                "parameters": {name: tpg.get_parameter(name) for name in tpg.list_parameters()},
                "acls": acls,
            }
        targets[target.wwn] = {"tpgs": tpgs}
    return {"available": True, "backstores": backstores, "targets": targets}
