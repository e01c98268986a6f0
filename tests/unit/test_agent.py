"""The agent's steps and protocol, on this machine (no storage stack needed)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from remirror.agent import handle
from remirror.agent.steps import run_steps


def test_steps_run_in_order_and_stop_at_the_first_failure(tmp_path: Path) -> None:
    marker = tmp_path / "after"
    results = run_steps(
        [
            {"kind": "run", "argv": ["true"]},
            {"kind": "run", "argv": ["sh", "-c", "echo nope >&2; exit 3"]},
            {"kind": "write_file", "path": str(marker), "content": "x"},
        ]
    )
    assert [r["ok"] for r in results] == [True, False]
    assert "exit code 3" in results[1]["error"]
    assert not marker.exists()


def test_a_known_exit_code_is_explained_and_secrets_stay_out(tmp_path: Path) -> None:
    (result,) = run_steps(
        [
            {
                "kind": "run",
                "argv": ["sh", "-c", "echo 'login failed for hunter2hunter2' >&2; exit 24", "hunter2hunter2"],
                "explain": {"24": "CHAP authentication to target T was refused"},
                "secrets": ["hunter2hunter2"],
            }
        ]
    )
    assert result["error"].startswith("CHAP authentication to target T was refused: login failed for")
    assert "hunter2" not in result["error"]


def test_files_are_written_whole_with_their_mode(tmp_path: Path) -> None:
    target = tmp_path / "etc" / "mdadm.conf"
    assert run_steps(
        [{"kind": "write_file", "path": str(target), "content": "ARRAY x\n", "mode": 0o600}]
    ) == [{"ok": True}]
    assert target.read_text() == "ARRAY x\n"
    assert target.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in target.parent.iterdir()] == ["mdadm.conf"]  # no temp file left


def test_wait_path_gives_up_with_a_message(tmp_path: Path) -> None:
    (result,) = run_steps([{"kind": "wait_path", "path": str(tmp_path / "never"), "timeout": 0.5}])
    assert result == {"ok": False, "error": f"{tmp_path / 'never'} did not appear within 0.5s"}


def test_unknown_requests_are_answered_not_crashed_on() -> None:
    assert handle({"op": "reboot"}) == {"protocol": 1, "error": "unknown op 'reboot'", "commands": 0}


def test_each_answer_counts_the_commands_its_request_ran() -> None:
    steps = [{"kind": "run", "argv": ["true"]}, {"kind": "run", "argv": ["true"]}]
    assert handle({"op": "run", "steps": steps})["commands"] == 2
    assert handle({"op": "run", "steps": steps[:1]})["commands"] == 1  # per request, not a total


def test_the_controller_sums_what_each_site_cost() -> None:
    from remirror.agent.client import AgentClient
    from remirror.profile.model import Site

    client = AgentClient("here", Site(host="local"))
    for _ in range(3):
        client.run([{"kind": "run", "argv": ["true"]}])
    assert (client.requests, client.commands_run) == (3, 3)


def test_remirror_agent_speaks_json_on_stdin_and_stdout() -> None:
    request = {"op": "run", "steps": [{"kind": "run", "argv": ["true"]}]}
    done = subprocess.run(
        [sys.executable, "-m", "remirror", "agent"],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout) == {"protocol": 1, "results": [{"ok": True}], "commands": 1}


def test_chap_secrets_go_into_the_node_record_file_not_argv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The module, not the function of the same name that remirror.agent exports.
    monkeypatch.setattr(importlib.import_module("remirror.agent.observe"), "ISCSI_NODES", tmp_path)
    record = tmp_path / "iqn.2026-11.test:t" / "192.0.2.2,3260,1" / "default"
    record.parent.mkdir(parents=True)
    record.write_text(
        "# BEGIN RECORD 2.1.8\nnode.name = iqn.2026-11.test:t\n"
        "node.session.auth.password = old-secret\n# END RECORD\n"
    )
    step = {
        "kind": "node_secrets",
        "target": "iqn.2026-11.test:t",
        "address": "192.0.2.2",
        "port": 3260,
        "values": {
            "node.session.auth.password": "new-secret-1",
            "node.session.auth.password_in": "new-secret-2",
        },
        "secrets": ["new-secret-1", "new-secret-2"],
    }
    assert run_steps([step]) == [{"ok": True}]
    assert record.read_text() == (
        "# BEGIN RECORD 2.1.8\nnode.name = iqn.2026-11.test:t\n"
        "node.session.auth.password = new-secret-1\n"
        "node.session.auth.password_in = new-secret-2\n# END RECORD\n"
    )
    assert record.stat().st_mode & 0o777 == 0o600
    (missing,) = run_steps([{**step, "target": "iqn.2026-11.test:none"}])
    assert missing == {
        "ok": False,
        "error": "no iSCSI node record for iqn.2026-11.test:none at 192.0.2.2:3260",
    }


def test_remirror_agent_serve_answers_one_line_per_request_in_order() -> None:
    requests = [{"op": "run", "steps": [{"kind": "run", "argv": ["true"]}]}, {"op": "reboot"}]
    done = subprocess.run(
        [sys.executable, "-m", "remirror", "agent", "--serve"],
        input="".join(json.dumps(r) + "\n" for r in requests) + "not json\n",
        capture_output=True,
        text=True,
        check=True,
    )
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert answers[0] == {"protocol": 1, "results": [{"ok": True}], "commands": 1}
    assert answers[1] == {"protocol": 1, "error": "unknown op 'reboot'", "commands": 0}
    assert answers[2]["error"].startswith("the request is not JSON")
