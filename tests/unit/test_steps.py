"""Typed steps and the agent boundary: what the planner builds is what the agent can run."""

from __future__ import annotations

import json
from typing import Any

import pytest

from remirror.agent.policy_steps import STEP_CHECKS
from remirror.agent.steps import _STEPS
from remirror.protocol import CATALOGUE, WireError, decode, steps
from remirror.protocol.steps import (
    ISCSI_ERR_LOGIN_AUTH_FAILED,
    CdpStack,
    LegRecordPromote,
    Lio,
    Run,
    Step,
    WaitPath,
    WireguardPeer,
    WireguardTunnel,
)


def test_the_catalogue_holds_every_step_with_its_check_and_its_handler() -> None:
    classes = {cls for cls in vars(steps).values() if isinstance(cls, type) and issubclass(cls, Step)}
    assert set(CATALOGUE.values()) == classes - {Step}
    assert all(CATALOGUE[cls.kind] is cls for cls in classes - {Step})
    assert set(_STEPS) == set(CATALOGUE.values()) == set(STEP_CHECKS)


def test_a_step_becomes_the_agents_json_with_defaults_left_to_the_agent() -> None:
    assert Run(("mdadm", "--stop", "/dev/md/m0")).as_dict() == {
        "kind": "run",
        "argv": ["mdadm", "--stop", "/dev/md/m0"],
    }
    login = Run(("iscsiadm", "--login"), (0, 15), {ISCSI_ERR_LOGIN_AUTH_FAILED: "CHAP refused"})
    # JSON object keys are strings: the agent looks the exit code up as str(returncode).
    assert login.as_dict() == {
        "kind": "run",
        "argv": ["iscsiadm", "--login"],
        "ok_codes": [0, 15],
        "explain": {"24": "CHAP refused"},
    }
    assert "n" not in LegRecordPromote(("/dev/a0",), "u", "b", 1, "planned").as_dict()
    assert LegRecordPromote(("/dev/a0",), "u", "b", 1, "resolve", 4).as_dict()["n"] == 4


def test_an_lio_step_carries_its_op_and_its_secrets_for_redaction() -> None:
    acl = Lio(
        "set_acl",
        {"iqn": "t", "initiator": "i", "lun": 0, "chap": {"username": "u", "password": "s"}},
        ("s",),
    )
    assert acl.as_dict() == {
        "kind": "lio",
        "op": "set_acl",
        "iqn": "t",
        "initiator": "i",
        "lun": 0,
        "chap": {"username": "u", "password": "s"},
        "secrets": ["s"],
    }
    assert "secrets" not in Lio("delete_target", {"iqn": "t"}).as_dict()


EXAMPLES: list[Step] = [
    Run(("mdadm", "--stop", "/dev/md/m0")),
    Run(("iscsiadm", "--login"), (0, 15), {ISCSI_ERR_LOGIN_AUTH_FAILED: "CHAP refused"}, 30.0, ("s",)),
    WaitPath("/dev/md/m0", 5.0),
    LegRecordPromote(("/dev/a0",), "u", "b", 1, "resolve", 4),
    CdpStack("m0", "/dev/md/m0", 65536, 25, False, False),
    Lio("set_acl", {"iqn": "t", "initiator": "i", "lun": 0}, ("s",)),
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
        (["run"], "not a step of the protocol"),
        ({"kind": "run"}, "its argv is missing"),
        ({"kind": "run", "argv": "mdadm --stop /dev/md0"}, "is not a list"),
        ({"kind": "run", "argv": ["mdadm", 7]}, "is not a text"),
        ({"kind": "run", "argv": ["mdadm"], "cwd": "/"}, "cwd is not a field of it"),
        ({"kind": "run", "argv": ["mdadm"], "ok_codes": [True]}, "is not a whole number"),
        ({"kind": "run", "argv": ["mdadm"], "explain": {"x": "y"}}, "is not a number"),
        ({"kind": "run", "argv": ["mdadm"], "timeout": "60"}, "is not a number"),
        ({"kind": "wait_path", "path": "/dev/x", "timeout": float("nan")}, "is not a number"),
        ({"kind": "cdp_stack", "mirror": "m", "md": "/dev/md0", "chunk": 1, "history": 1, "fresh": 0,
          "allow_data": False}, "fresh: 0 is not true or false"),
        ({"kind": "leg_record_promote", "devices": ["/dev/a"], "array": "u", "site": "b", "after": 1.5,
          "how": "planned"}, "after: 1.5 is not a whole number"),
        ({"kind": "wireguard_tunnel", "interface": "wg", "key_file": "k", "port": 1, "address": "a",
          "keepalive": 1, "peers": [{"public_key": "k", "address": "a"}]}, "endpoint is missing"),
        ({"kind": "lio", "op": ["save"]}, "is not an operation"),
    ],
)  # fmt: skip
def test_what_is_not_a_step_of_the_catalogue_is_refused_whole(obj: Any, says: str) -> None:
    with pytest.raises(WireError, match=says):
        decode(obj)
