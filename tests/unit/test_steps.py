"""Typed steps and the agent boundary: what the planner builds is what the agent can run."""

from __future__ import annotations

from remirror.agent.steps import _STEPS
from remirror.plan import steps
from remirror.plan.steps import ISCSI_ERR_LOGIN_AUTH_FAILED, LegRecordPromote, Lio, Run, Step


def _kinds() -> set[str]:
    return {
        cls.kind
        for cls in vars(steps).values()
        if isinstance(cls, type) and issubclass(cls, Step) and cls is not Step
    }


def test_every_step_the_planner_can_build_has_a_handler_in_the_agent() -> None:
    assert _kinds() == set(_STEPS)


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
