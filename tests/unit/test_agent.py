"""The agent's steps and protocol, on this machine (no storage stack needed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
    assert handle({"op": "reboot"}) == {"protocol": 1, "error": "unknown op 'reboot'"}


def test_remirror_agent_speaks_json_on_stdin_and_stdout() -> None:
    request = {"op": "run", "steps": [{"kind": "run", "argv": ["true"]}]}
    done = subprocess.run(
        [sys.executable, "-m", "remirror", "agent"],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout) == {"protocol": 1, "results": [{"ok": True}]}
