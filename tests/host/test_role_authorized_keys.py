"""The role's authorized_keys task, run by ansible-playbook on this host against a scratch file.

The lab's /root is the host's (remirror.lab.guest), so the lab test of the role
leaves root's authorized_keys alone; this runs the role's own task (read from
deploy.yml, only the file it edits changed) and sshd's side of the same line is
shown in the lab (tests/lab/test_security.py).
"""

from __future__ import annotations

from pathlib import Path

from ruamel.yaml import YAML

from tests.host.ansible_play import ROLE, run_tasks

DEPLOY = ROLE / "tasks/deploy.yml"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPfyLTj/2C5tXLBbYYCXjActKJW5SEvtyFqpbt59xVBF remirror"


def _run_task(tmp_path: Path, restrict: bool) -> str:
    (task,) = [
        t
        for t in YAML(typ="safe").load(DEPLOY.read_text())
        if "authorized_keys" in str(t.get("ansible.builtin.lineinfile"))
    ]
    task["ansible.builtin.lineinfile"].update(path=str(tmp_path / "authorized_keys"), owner=None, group=None)
    variables = {"remirror_ssh_public_key": KEY, "remirror_ssh_restrict": restrict}
    run_tasks(tmp_path, [task], variables)
    return (tmp_path / "authorized_keys").read_text()


def test_the_key_may_only_speak_the_agent_protocol_and_an_older_open_line_is_replaced(tmp_path: Path) -> None:
    (tmp_path / "authorized_keys").write_text(f"ssh-ed25519 AAAAadmin admin@example\n{KEY}\n")
    expected = f'ssh-ed25519 AAAAadmin admin@example\ncommand="remirror agent --serve",restrict {KEY}\n'
    assert _run_task(tmp_path, restrict=True) == expected
    assert _run_task(tmp_path, restrict=True) == expected  # a second run changes nothing
    assert _run_task(tmp_path, restrict=False) == f"ssh-ed25519 AAAAadmin admin@example\n{KEY}\n"
