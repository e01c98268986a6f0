"""Typed steps and the agent boundary: what the planner builds is what the agent can run."""

from __future__ import annotations

import json
from typing import Any

import pytest

from remirror.agent.policy_steps import STEP_CHECKS
from remirror.agent.steps import _STEPS
from remirror.errors import RemirrorError
from remirror.protocol import CATALOGUE, WireError, commands, decode, lio, steps
from remirror.protocol.commands import IscsiNode, IscsiNodeUpdate, MdBitmap, MdCreate, MdMember, MdStop
from remirror.protocol.lio import AclChap, LioCreateTarget, LioDeleteTarget, LioSetAcl
from remirror.protocol.steps import (
    ISCSI_ERR_LOGIN_AUTH_FAILED,
    CdpStack,
    LegRecordPromote,
    Step,
    WaitPath,
    WireguardPeer,
    WireguardTunnel,
)


def test_the_catalogue_holds_every_step_with_its_check_and_its_handler() -> None:
    classes = {
        cls
        for module in (steps, commands, lio)
        for cls in vars(module).values()
        if isinstance(cls, type) and issubclass(cls, Step) and cls not in (Step, commands.Command)
    }
    assert set(CATALOGUE.values()) == classes
    assert all(CATALOGUE[cls.kind] is cls for cls in classes)
    assert set(_STEPS) == set(CATALOGUE.values()) == set(STEP_CHECKS)


def test_a_step_becomes_the_agents_json_with_defaults_left_to_the_agent() -> None:
    assert MdStop("/dev/md/m0").as_dict() == {"kind": "md_stop", "md": "/dev/md/m0"}
    login = IscsiNode(
        "iqn.t",
        "192.0.2.2",
        3260,
        "login",
        ok_codes=(0, 15),
        explain={ISCSI_ERR_LOGIN_AUTH_FAILED: "CHAP refused"},
    )
    # JSON object keys are strings: the agent reads the exit code back as a number.
    assert login.as_dict() == {
        "kind": "iscsi_node",
        "target": "iqn.t",
        "address": "192.0.2.2",
        "port": 3260,
        "op": "login",
        "ok_codes": [0, 15],
        "explain": {"24": "CHAP refused"},
    }
    assert "n" not in LegRecordPromote(("/dev/a0",), "u", "b", 1, "planned").as_dict()
    assert LegRecordPromote(("/dev/a0",), "u", "b", 1, "resolve", 4).as_dict()["n"] == 4


def test_an_acl_carries_its_chap_and_its_secrets_for_redaction() -> None:
    acl = LioSetAcl("t", "i", 0, AclChap("u", "s"), ("s",))
    assert acl.as_dict() == {
        "kind": "lio_set_acl",
        "iqn": "t",
        "initiator": "i",
        "lun": 0,
        "chap": {"username": "u", "password": "s", "mutual_username": "", "mutual_password": ""},
        "secrets": ["s"],
    }
    assert "secrets" not in LioDeleteTarget("t").as_dict()


CREATE = MdCreate(
    "/dev/md/m0",
    "m0",
    "0a1b2c3d:0a1b2c3d:0a1b2c3d:0a1b2c3d",
    "1.2",
    ("missing", "/dev/a0"),
    64 << 20,
    1 << 30,
    256,
)
EXAMPLES: list[Step] = [
    MdStop("/dev/md/m0"),
    CREATE,
    MdBitmap("/dev/md/m0", None),
    MdMember("/dev/md/m0", "remove", "detached", ok_codes=(0, 1)),
    IscsiNode("iqn.t", "fe80::1", 3260, "login", ok_codes=(0, 15), explain={ISCSI_ERR_LOGIN_AUTH_FAILED: "CHAP refused"}),
    IscsiNodeUpdate("iqn.t", "192.0.2.2", 3260, {"node.startup": "manual"}),
    WaitPath("/dev/md/m0", 5.0),
    LegRecordPromote(("/dev/a0",), "u", "b", 1, "resolve", 4),
    CdpStack("m0", "/dev/md/m0", 65536, 25, False, False),
    LioSetAcl("t", "i", 0, AclChap("u", "s", "t", "m"), ("s", "m")),
    LioSetAcl("t", "i", 0),
    LioCreateTarget("t", True, {"InitialR2T": "Yes"}),
    WireguardTunnel("wg-rm0", "/etc/remirror/wireguard/wg-rm0.key", 51820, "169.254.8.1/24",
                    (WireguardPeer("k" * 43 + "=", "169.254.8.2", None),), 25),
]  # fmt: skip


@pytest.mark.parametrize("step", EXAMPLES, ids=lambda step: step.kind)
def test_a_step_crosses_the_wire_as_itself(step: Step) -> None:
    assert decode(json.loads(json.dumps(step.as_dict()))) == step


@pytest.mark.parametrize(
    ("obj", "says"),
    [
        ({"kind": "shell", "argv": ["sh"]}, "not a step of the protocol"),
        ({"kind": "run", "argv": ["mdadm", "--stop", "/dev/md0"]}, "not a step of the protocol"),
        (["md_stop"], "not a step of the protocol"),
        ({"kind": "md_stop"}, "its md is missing"),
        ({"kind": "md_stop", "md": ["/dev/md0"]}, "is not a text"),
        ({"kind": "md_stop", "md": "/dev/md0", "argv": ["sh"]}, "argv is not a field of it"),
        ({"kind": "md_stop", "md": "/dev/md0", "ok_codes": [True]}, "is not a whole number"),
        ({"kind": "md_stop", "md": "/dev/md0", "explain": {"x": "y"}}, "is not a number"),
        ({"kind": "md_member", "md": "/dev/md0", "op": "grow", "device": "/dev/a0"}, "is not one of add, re-add"),
        ({"kind": "iscsi_node", "target": "t", "address": "a", "port": "3260", "op": "login"}, "not a whole"),
        ({"kind": "wait_path", "path": "/dev/x", "timeout": "60"}, "is not a number"),
        ({"kind": "wait_path", "path": "/dev/x", "timeout": float("nan")}, "is not a number"),
        ({"kind": "cdp_stack", "mirror": "m", "md": "/dev/md0", "chunk": 1, "history": 1, "fresh": 0,
          "allow_data": False}, "fresh: 0 is not true or false"),
        ({"kind": "leg_record_promote", "devices": ["/dev/a"], "array": "u", "site": "b", "after": 1.5,
          "how": "planned"}, "after: 1.5 is not a whole number"),
        ({"kind": "wireguard_tunnel", "interface": "wg", "key_file": "k", "port": 1, "address": "a",
          "keepalive": 1, "peers": [{"public_key": "k", "address": "a"}]}, "endpoint is missing"),
        ({"kind": "lio", "op": "save", "path": "/etc/target/saveconfig.json"}, "not a step of the protocol"),
        ({"kind": "lio_set_acl", "iqn": "t", "initiator": "i", "lun": 0, "chap": {"username": "u"}}, "password is missing"),
        ({"kind": "lio_create_target", "iqn": "t", "chap": 1}, "chap: 1 is not true or false"),
    ],
)  # fmt: skip
def test_what_is_not_a_step_of_the_catalogue_is_refused_whole(obj: Any, says: str) -> None:
    with pytest.raises(WireError, match=says):
        decode(obj)


def test_each_command_builds_its_argv_at_the_site_from_its_fields() -> None:
    assert CREATE.argv() == (
        "mdadm", "--create", "/dev/md/m0", "--run", "--metadata=1.2", "--level=1", "--raid-devices=2",
        "--uuid=0a1b2c3d:0a1b2c3d:0a1b2c3d:0a1b2c3d", "--name=m0", "--homehost=<none>", "--bitmap=internal",
        "--bitmap-chunk=65536K", "--size=1024M", "--write-behind=256", "missing", "/dev/a0",
    )  # fmt: skip
    assert MdBitmap("/dev/md/m0", 1 << 20).argv()[-2:] == ("--bitmap=internal", "--bitmap-chunk=1024K")
    assert MdMember("/dev/md/m0", "re-add", "/dev/a0").argv() == (
        "mdadm",
        "/dev/md/m0",
        "--re-add",
        "/dev/a0",
    )
    assert IscsiNode("iqn.t", "fe80::1", 3260, "new").argv() == (
        "iscsiadm", "-m", "node", "-T", "iqn.t", "-p", "[fe80::1]:3260", "-o", "new",
    )  # fmt: skip
    update = IscsiNodeUpdate(
        "iqn.t", "192.0.2.2", 3260, {"node.startup": "manual", "node.conn[0].timeo": "5"}
    )
    assert update.argv()[7:] == (
        "-o", "update", "-n", "node.startup", "-v", "manual", "-n", "node.conn[0].timeo", "-v", "5",
    )  # fmt: skip


def test_a_sysfs_write_finds_its_device_by_number_never_by_a_missing_path_s_name(tmp_path: Any) -> None:
    # At a DR site the mirror's array is not assembled: `/dev/md/md0` is not there, and its file
    # name would be the host's own system RAID's (helper review of 2f3e879).
    regular = tmp_path / "md0"
    regular.write_text("")
    for path, says in (("/dev/md/md0-not-here", "is not there"), (str(regular), "is not a block device")):
        for step in (
            steps.SetMdAttribute(path, "safe_mode_delay", "10"),
            steps.SetMemberState(path, "/dev/sda", "-writemostly"),
            steps.WriteDiskSysfs(path, "queue/wbt_lat_usec", "0"),
        ):
            with pytest.raises(RemirrorError, match=says):
                _STEPS[type(step)](step)
