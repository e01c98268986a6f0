"""LIO on site B and open-iscsi on site A talk across the lab link."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from remirror.lab.spec import INITIATOR_NAMES, SITE_B_ADDRESS
from tests.lab.conftest import on_b, sh

IQN = "iqn.2026-11.org.remirror.lab:test.contract"
PORTAL = f"{SITE_B_ADDRESS}:3260"
BY_PATH = Path(f"/dev/disk/by-path/ip-{PORTAL}-iscsi-{IQN}-lun-0")
DISK_B = "/dev/lab/b1"

# Runs on site B (its namespaces) with this checkout's Python and rtslib-fb.
LIO = """
import sys
from rtslib_fb import (BlockStorageObject, FabricModule, LUN, MappedLUN, NetworkPortal, NodeACL,
                       RTSRoot, Target, TPG)
action, iqn, dev, initiator, address = sys.argv[1:6]
if action == "create":
    so = BlockStorageObject("labcontract", dev=dev)
    tpg = TPG(Target(FabricModule("iscsi"), iqn), 1)
    NetworkPortal(tpg, address, 3260)
    lun = LUN(tpg, 0, so)
    tpg.set_attribute("authentication", "0")
    tpg.set_attribute("generate_node_acls", "0")
    MappedLUN(NodeACL(tpg, initiator), 0, lun)
    tpg.enable = True
else:
    root = RTSRoot()
    for target in list(root.targets):
        if target.wwn == iqn:
            target.delete()
    for so in list(root.storage_objects):
        if so.name == "labcontract":
            so.delete()
"""


def _lio(action: str) -> None:
    on_b(sys.executable, "-c", LIO, action, IQN, DISK_B, INITIATOR_NAMES["a"], SITE_B_ADDRESS)


@pytest.fixture
def exported_disk() -> Iterator[Path]:
    """A target on site B exporting /dev/lab/b1, logged in from site A; torn down afterwards."""
    _lio("create")
    try:
        sh("iscsiadm", "-m", "discovery", "-t", "sendtargets", "-p", PORTAL)
        sh("iscsiadm", "-m", "node", "-T", IQN, "-p", PORTAL, "--login")
        deadline = time.monotonic() + 30
        while not BY_PATH.exists():
            assert time.monotonic() < deadline, f"{BY_PATH} did not appear after login"
            sh("udevadm", "settle", "--timeout=5")
            time.sleep(0.2)
        yield BY_PATH
    finally:
        sh("iscsiadm", "-m", "node", "-T", IQN, "-p", PORTAL, "--logout", ok_codes=(0, 21))
        sh("iscsiadm", "-m", "node", "-T", IQN, "-p", PORTAL, "-o", "delete", ok_codes=(0, 21))
        _lio("delete")


def _read(path: str, offset: int, length: int) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.pread(fd, length, offset)
    finally:
        os.close(fd)


def test_a_write_from_site_a_lands_on_site_b_disk(exported_disk: Path) -> None:
    payload = os.urandom(1024 * 1024)
    offset = 8 * 1024 * 1024
    fd = os.open(exported_disk, os.O_WRONLY | os.O_SYNC)
    try:
        os.pwrite(fd, payload, offset)
        os.fsync(fd)
    finally:
        os.close(fd)
    # Read site B's own disk, not through iSCSI: the bytes crossed the link.
    on_b("blockdev", "--flushbufs", DISK_B)
    assert (
        hashlib.sha256(_read(DISK_B, offset, len(payload))).hexdigest() == hashlib.sha256(payload).hexdigest()
    )


def test_the_session_runs_between_the_two_namespaces(exported_disk: Path) -> None:
    sessions = sh("iscsiadm", "-m", "session").stdout
    assert IQN in sessions
    assert SITE_B_ADDRESS in sessions
    # The portal socket lives in site B: site A's namespace listens on nothing at 3260.
    assert ":3260" not in sh("ss", "-ltn").stdout
    assert f"{SITE_B_ADDRESS}:3260" in on_b("ss", "-ltn").stdout


# Runs on site B: the agent's own LIO handlers (remirror.agent.lio_steps) on a target of their own.
ACL_CHAP = """
import json, sys
from rtslib_fb import FabricModule, NodeACL, Target, TPG
from remirror.agent.steps import run_steps
iqn, initiator, disk = sys.argv[1:4]
chap = {"username": "fin", "password": "p" * 16}
mutual = {**chap, "mutual_username": "dr", "mutual_password": "q" * 16}

def acl(chap):
    results = run_steps([{"kind": "lio_set_acl", "iqn": iqn, "initiator": initiator, "lun": 0, "chap": chap}])
    assert results[-1]["ok"], results
    found = NodeACL(TPG(Target(FabricModule("iscsi"), iqn, mode="lookup"), 1, mode="lookup"), initiator, mode="lookup")
    return [found.chap_userid, found.chap_mutual_userid, found.chap_mutual_password]

made = run_steps([
    {"kind": "lio_create_backstore", "name": "labacl", "dev": disk},
    {"kind": "lio_create_target", "iqn": iqn, "chap": True},
    {"kind": "lio_create_lun", "iqn": iqn, "lun": 0, "backstore": "labacl"},
])
try:
    assert all(result["ok"] for result in made), made
    print(json.dumps([acl(mutual), acl(chap), acl(None)]))
finally:
    run_steps([{"kind": "lio_delete_target", "iqn": iqn}, {"kind": "lio_delete_backstore", "name": "labacl"}])
"""


def test_an_acl_keeps_no_chap_the_profile_dropped() -> None:
    """A mutual CHAP the profile no longer gives is cleared from the ACL (LIO's NULL), and CHAP
    with it when the target no longer asks for it: the ACL holds what the step says, nothing from before."""
    done = on_b(sys.executable, "-c", ACL_CHAP, f"{IQN}.acl", INITIATOR_NAMES["a"], DISK_B)
    assert json.loads(done.stdout) == [["fin", "dr", "q" * 16], ["fin", "", ""], ["", "", ""]]
