"""The agent's steps and protocol, on this machine (no storage stack needed)."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import pytest

from remirror.agent import handle
from remirror.agent.protocol import PROTOCOL_VERSION
from remirror.agent.steps import run_steps
from remirror.errors import RemirrorError
from remirror.protocol.commands import MdReadWrite, MdStop
from remirror.protocol.lio import LioSetAcl

# The agent's loop is the subject here, not mdadm: the commands' argv are shell scripts.
STOP = {"kind": "md_stop", "md": "/dev/md/unit-test"}
READ_WRITE = {"kind": "md_readwrite", "md": "/dev/md/unit-test"}


def scripted(monkeypatch: pytest.MonkeyPatch, command: type[Any], script: str) -> None:
    """`command`'s argv, at the site, is `sh -c SCRIPT`."""
    monkeypatch.setattr(command, "argv", lambda self: ("sh", "-c", script))


@pytest.fixture
def stop_is_true(monkeypatch: pytest.MonkeyPatch) -> None:
    scripted(monkeypatch, MdStop, "true")


def test_steps_run_in_order_and_stop_at_the_first_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop_is_true: None
) -> None:
    marker = tmp_path / "after"
    scripted(monkeypatch, MdReadWrite, "echo nope >&2; exit 3")
    results = run_steps([STOP, READ_WRITE, {"kind": "wait_path", "path": str(marker), "timeout": 0.1}])
    assert [r["ok"] for r in results] == [True, False]
    assert "exit code 3" in results[1]["error"]
    assert not marker.exists()


def test_a_known_exit_code_is_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    scripted(monkeypatch, MdStop, "echo 'md0: no such array' >&2; exit 24")
    (result,) = run_steps([{**STOP, "explain": {"24": "the array was never assembled"}}])
    assert result["error"].startswith("the array was never assembled: md0: no such array")


def test_secrets_a_step_carries_stay_out_of_its_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from remirror.agent import steps

    def fails(step: LioSetAcl) -> None:
        assert step.chap is not None
        raise RemirrorError(f"rtslib refused password {step.chap.password}")

    monkeypatch.setitem(steps._STEPS, LioSetAcl, fails)
    (result,) = run_steps(
        [
            {
                "kind": "lio_set_acl",
                "iqn": "iqn.2026-11.org.example:t",
                "initiator": "iqn.2026-11.org.example:i",
                "lun": 0,
                "chap": {"username": "u", "password": "hunter2hunter2"},
                "secrets": ["hunter2hunter2"],
            }
        ]
    )
    assert result == {"ok": False, "error": "rtslib refused password <redacted>"}


def test_mdadm_conf_gets_remirrors_block_the_rest_kept_written_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from remirror.facts import parsers
    from remirror.facts.mdadm_conf import CONF_BEGIN, CONF_END

    target = tmp_path / "etc" / "mdadm.conf"
    target.parent.mkdir()
    target.write_text("HOMEHOST <system>\nMAILADDR root\n")
    monkeypatch.setattr(parsers, "MDADM_CONF", str(target))
    line = {
        "uuid": "0a1b2c3d:0a1b2c3d:0a1b2c3d:0a1b2c3d",
        "device": "/dev/md/m0",
        "metadata": "1.2",
        "name": "m0",
    }
    assert run_steps([{"kind": "mdadm_conf", "arrays": [line, {"uuid": "1:2:3:4"}]}]) == [{"ok": True}]
    assert target.read_text() == (
        "HOMEHOST <system>\nMAILADDR root\n"
        f"{CONF_BEGIN}\n"
        "ARRAY /dev/md/m0 metadata=1.2 UUID=0a1b2c3d:0a1b2c3d:0a1b2c3d:0a1b2c3d name=m0\n"
        "ARRAY <ignore> UUID=1:2:3:4\n"
        f"{CONF_END}\n"
    )
    assert target.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in target.parent.iterdir()] == ["mdadm.conf"]  # no temp file left


def test_wait_path_gives_up_with_a_message(tmp_path: Path) -> None:
    (result,) = run_steps([{"kind": "wait_path", "path": str(tmp_path / "never"), "timeout": 0.5}])
    assert result == {"ok": False, "error": f"{tmp_path / 'never'} did not appear within 0.5s"}


def test_unknown_requests_are_answered_not_crashed_on() -> None:
    assert handle({"op": "reboot"}) == {
        "protocol": PROTOCOL_VERSION,
        "error": "unknown op 'reboot'",
        "commands": 0,
    }


def test_each_answer_counts_the_commands_its_request_ran(stop_is_true: None) -> None:
    steps = [STOP, STOP]
    assert handle({"op": "run", "steps": steps})["commands"] == 2
    assert handle({"op": "run", "steps": steps[:1]})["commands"] == 1  # per request, not a total


def test_the_controller_sums_what_each_site_cost(stop_is_true: None) -> None:
    from remirror.agent.client import AgentClient
    from remirror.profile.model import Site

    client = AgentClient("here", Site(host="local"))
    for _ in range(3):
        client.run([STOP])
    assert (client.requests, client.commands_run) == (3, 3)


def test_remirror_agent_speaks_json_on_stdin_and_stdout() -> None:
    request = {"op": "run", "steps": [{"kind": "wait_path", "path": "/"}]}  # there: no command
    done = subprocess.run(
        [sys.executable, "-m", "remirror", "agent"],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout) == {"protocol": PROTOCOL_VERSION, "results": [{"ok": True}], "commands": 0}


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


def test_chap_secrets_never_reach_a_file_outside_the_targets_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The handler's own guard, behind the policy's (issue 44): a record path that resolves out of
    # the target's directory (a `..` in the address, a comma-named directory elsewhere) is not one.
    nodes = tmp_path / "nodes"
    (nodes / "iqn.2026-11.test:t").mkdir(parents=True)
    monkeypatch.setattr(importlib.import_module("remirror.agent.observe"), "ISCSI_NODES", nodes)
    victim = tmp_path / "a,b" / "authorized_keys"
    victim.parent.mkdir()
    victim.write_text("ssh-ed25519 AAAA operator\n")
    step = {
        "kind": "node_secrets",
        "target": "iqn.2026-11.test:t",
        "address": "../../a",
        "port": "b",
        "values": {"node.session.auth.password": "ssh-ed25519 AAAA attacker"},
    }
    (result,) = run_steps([step])
    assert result["ok"] is False
    (result,) = run_steps([{**step, "target": "..", "address": "a", "port": "b"}])
    assert result["ok"] is False
    assert victim.read_text() == "ssh-ed25519 AAAA operator\n"


def test_a_remote_controllers_lock_names_who_holds_it_in_the_sites_own_words(tmp_path: Path) -> None:
    # Checked (SSH_CONNECTION set) and holding no profile: the closed forms, any block device.
    env = {
        **os.environ,
        "SSH_CONNECTION": "192.0.2.1 5555 192.0.2.2 22",
        "SSH_CLIENT": "192.0.2.1 5555 22",
        "REMIRROR_LOCK_DIR": str(tmp_path),
    }
    requests = [
        {"op": "lock", "name": "site", "holder": "remirror apply\nforged line \x1b[2J", "wait": 0},
        {"op": "lock", "name": "cdp-m0.b", "holder": "x", "wait": 0},
    ]
    agent = subprocess.Popen(
        [sys.executable, "-m", "remirror", "agent", "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert agent.stdin is not None
    assert agent.stdout is not None
    agent.stdin.write("".join(json.dumps(r) + "\n" for r in requests))
    agent.stdin.flush()
    taken, refused = (json.loads(agent.stdout.readline()) for _ in requests)
    try:
        assert taken == {"protocol": PROTOCOL_VERSION, "locked": True, "commands": 0, "lease": 120.0}
        assert "refused: " in refused["error"]
        assert "'site' lock" in refused["error"]
        holder = (tmp_path / "site.lock").read_text()
        assert holder.startswith(f"remirror's agent (pid {agent.pid}) for a controller at 192.0.2.1 over SSH")
        assert "\n" not in holder.strip()
        assert "\x1b" not in holder
        assert not (tmp_path / "cdp-m0.b.lock").exists()
    finally:
        agent.stdin.close()
        agent.wait(timeout=30)


def test_remirror_agent_serve_answers_one_line_per_request_in_order() -> None:
    requests = [{"op": "run", "steps": [{"kind": "wait_path", "path": "/"}]}, {"op": "reboot"}]
    done = subprocess.run(
        [sys.executable, "-m", "remirror", "agent", "--serve"],
        input="".join(json.dumps(r) + "\n" for r in requests) + "not json\n",
        capture_output=True,
        text=True,
        check=True,
    )
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert answers[0] == {"protocol": PROTOCOL_VERSION, "results": [{"ok": True}], "commands": 0}
    assert answers[1] == {"protocol": PROTOCOL_VERSION, "error": "unknown op 'reboot'", "commands": 0}
    assert answers[2]["error"].startswith("the request is not JSON")


# --- locks (docs/safety.md, flow 6) ------------------------------------------------------------


def _serve(
    tmp_path: Path,
    stop_script: str = "",
    lease: float | None = None,
    text: bool = True,
    env: dict[str, str] | None = None,
) -> Any:
    """`remirror agent --serve` as SSH starts it: a session of its own, locks under tmp_path;
    `stop_script`: the `md_stop` command's argv is `sh -c STOP_SCRIPT` (the agent is the subject);
    `lease`: the site's REMIRROR_LOCK_LEASE; `text`: pipes of text (False: of bytes, as SSH's are);
    `env`: more of its environment (sshd's SSH_CONNECTION: from another host)."""
    argv = [sys.executable, "-m", "remirror", "agent", "--serve"]
    if stop_script:
        patch = f"from remirror.protocol.commands import MdStop\nMdStop.argv = lambda self: ('sh', '-c', {stop_script!r})\n"
        argv = [sys.executable, "-c", f"{patch}from remirror.cli import main\nmain(['agent', '--serve'])"]
    return subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=text,
        start_new_session=True,
        env={
            **os.environ,
            "REMIRROR_LOCK_DIR": str(tmp_path / "locks"),
            **({"REMIRROR_LOCK_LEASE": str(lease)} if lease else {}),
            **(env or {}),
        },
    )


def _ask(agent: subprocess.Popen[str], request: dict[str, object]) -> dict[str, object]:
    assert agent.stdin is not None
    assert agent.stdout is not None
    agent.stdin.write(json.dumps(request) + "\n")
    agent.stdin.flush()
    answer: dict[str, object] = json.loads(agent.stdout.readline())
    return answer


def _gone_within(pid: int, seconds: float) -> bool:
    """Whether process `pid` ends within `seconds` (it got SIGTERM with its agent's group)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_a_site_lock_is_held_while_its_agent_runs_and_named_to_whoever_waits(tmp_path: Path) -> None:
    from remirror.agent import lock

    agent = _serve(tmp_path)
    try:
        assert _ask(agent, {"op": "lock", "name": "site", "holder": "remirror apply (pid 7 on a)"}) == {
            "protocol": PROTOCOL_VERSION,
            "locked": True,
            "commands": 0,
            "lease": 120.0,  # the hold lapses after so long without a request (test_lock_lease.py)
        }
        # Another command (here this process) is told who holds it, and nothing else happens.
        with pytest.raises(
            lock.Busy, match=r"busy: remirror apply \(pid 7 on a\) since .* holds its site lock"
        ):
            lock.take("site", "remirror reconcile", wait=0.3)
        answer = _ask(agent, {"op": "lock", "name": "site"})
        assert answer["locked"] is False  # the agent holds it already: taking it again is a no-op
    finally:
        assert agent.stdin is not None
        agent.stdin.close()  # the controller ends: its agent, and the lock with it
        agent.wait(timeout=30)
    assert lock.take("site", "remirror reconcile", wait=5)
    lock.release("site")


def test_an_agent_whose_controller_goes_mid_request_ends_with_its_commands(tmp_path: Path) -> None:
    from remirror.agent import lock

    marker = tmp_path / "sleeping"
    agent = _serve(tmp_path, f"echo $$ > {marker}; exec sleep 600")
    assert agent.stdin is not None
    assert _ask(agent, {"op": "lock", "name": "site", "holder": "remirror apply"})["locked"] is True
    # A step that would run for ten minutes; the controller gives up on it (closes the channel).
    agent.stdin.write(
        json.dumps(
            {
                "op": "run",
                "steps": [STOP],
            }
        )
        + "\n"
    )
    agent.stdin.flush()
    deadline = time.monotonic() + 60
    while not marker.exists() or not marker.read_text().strip():
        assert time.monotonic() < deadline, "the step never started"
        time.sleep(0.1)
    sleeper = int(marker.read_text())
    agent.stdin.close()
    assert agent.wait(timeout=60) == 1
    assert "the controller went away mid-request" in (agent.stderr.read() if agent.stderr else "")
    assert _gone_within(sleeper, 10), "the agent's command outlived it"
    assert lock.take("site", "remirror reconcile", wait=5)  # and the lock with them
    lock.release("site")


def test_an_agent_of_another_protocol_is_refused_naming_both(monkeypatch: pytest.MonkeyPatch) -> None:
    from remirror.agent.client import AgentClient
    from remirror.errors import SiteError
    from remirror.profile.model import Site

    client = AgentClient("dr", Site(host="ssh://root@dr.example"))
    monkeypatch.setattr(
        client, "_remote", lambda _request, _secrets, _timeout: '{"protocol": 1, "facts": {}}'
    )
    with pytest.raises(
        SiteError, match=f"site dr: its remirror agent speaks protocol 1, this controller {PROTOCOL_VERSION}"
    ):
        client.observe(["/dev/sdb"])


def test_a_cdp_request_for_a_mirror_not_assembled_here_is_a_usage_refusal(tmp_path: Path) -> None:
    missing = str(tmp_path / "md-not-here")
    answer = handle({"op": "cdp", "do": "list", "mirror": "m0", "md": missing})
    assert answer["ok"] is False
    assert answer["usage"] is True
    assert answer["message"] == f"cdp: {missing} is not assembled on this host (run cdp on the primary)"
    unknown = handle({"op": "cdp", "do": "format", "mirror": "m0", "md": missing})
    assert (unknown["ok"], unknown["usage"], unknown["message"]) == (
        False,
        False,
        "unknown cdp request 'format'",
    )


def test_a_blank_proof_reads_the_whole_device_and_names_the_first_byte_that_is_not_zero(
    tmp_path: Path,
) -> None:
    from remirror.agent.direct import first_nonzero
    from remirror.agent.steps import run_steps

    disk = tmp_path / "disk"
    disk.write_bytes(bytes(9 * 1024 * 1024))  # more than one read of 4 MiB
    assert first_nonzero(str(disk)) is None
    assert run_steps([{"kind": "prove_blank", "device": str(disk), "timeout": 60}]) == [{"ok": True}]
    with disk.open("r+b") as f:
        f.seek(8 * 1024 * 1024 + 5)
        f.write(b"\x01")
    assert first_nonzero(str(disk)) == 8 * 1024 * 1024 + 5
    (result,) = run_steps([{"kind": "prove_blank", "device": str(disk), "timeout": 60}])
    assert result == {
        "ok": False,
        "error": f"{disk} is not blank: byte 8388613 is not zero, so initial_sync: skip would leave the"
        " legs different; zero it (blkdiscard --zeroout) or use initial_sync: full",
    }


def test_a_request_that_reads_a_whole_disk_is_waited_for_as_long_as_its_steps_say(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from remirror.agent.client import AGENT_TIMEOUT, AgentClient
    from remirror.profile.model import Site

    client = AgentClient("dr", Site(host="ssh://root@dr.example"))
    waited: list[float] = []

    def remote(_request: str, _secrets: list[str], timeout: float) -> str:
        waited.append(timeout)
        return json.dumps({"protocol": PROTOCOL_VERSION, "results": []})

    monkeypatch.setattr(client, "_remote", remote)
    client.run([STOP])
    client.run([{"kind": "prove_blank", "device": "/dev/sdb", "timeout": 36_000.0}])
    assert waited == [AGENT_TIMEOUT, 36_000.0]


def test_lio_is_read_beside_the_rest_and_its_failure_reaches_the_observe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from remirror.agent import observe_lio

    reader = threading.current_thread()
    monkeypatch.setattr(
        observe_lio, "read", lambda: {"available": False, "thread": threading.current_thread()}
    )
    found = observe_lio.read_beside()()
    assert found["available"] is False
    assert found["thread"] is not reader  # read in a thread of its own

    def broken() -> dict[str, object]:
        raise PermissionError("configfs")

    monkeypatch.setattr(observe_lio, "read", broken)
    wait = observe_lio.read_beside()
    with pytest.raises(PermissionError, match="configfs"):
        wait()


@pytest.mark.parametrize("kind", [ValueError, SystemExit])
def test_an_error_the_agent_did_not_expect_is_answered_and_logged_without_the_request_s_secrets(
    kind: type[BaseException], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import remirror.agent
    from remirror.agent import serve

    def breaks(request: dict[str, object]) -> dict[str, object]:
        raise kind(f"cannot use {request['steps'][0]['secrets'][0]}")  # type: ignore[index]

    monkeypatch.setattr(remirror.agent, "handle", breaks)
    read, write = os.pipe()  # the controller's end stays open: it waits for the answer
    try:
        request = {"op": "run", "steps": [{"kind": "lio_set_acl", "secrets": ["chap-s3cret"]}]}
        answer = serve._answer_unless_abandoned(request, serve._Requests(read))
    finally:
        os.close(read)
        os.close(write)
    assert answer == {"error": f"the agent failed: {kind.__name__}: cannot use <redacted>"}
    logged = capsys.readouterr().err
    assert f"{kind.__name__}: cannot use <redacted>" in logged
    assert "chap-s3cret" not in logged


def test_a_step_s_error_is_redacted_of_every_step_s_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    from remirror.agent import steps

    def quotes_the_next(obj: object) -> object:
        raise ValueError("it would have set s3cret-of-the-next-step")

    monkeypatch.setattr(steps, "decode", quotes_the_next)
    results = steps.run_steps([{"secrets": []}, {"secrets": ["s3cret-of-the-next-step"]}])
    assert results == [{"ok": False, "error": "ValueError: it would have set <redacted>"}]


def test_the_local_agents_unexpected_error_is_said_without_the_requests_secrets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import remirror.agent
    from remirror.agent.client import AgentClient
    from remirror.errors import SiteError
    from remirror.profile.model import Site

    secret = "s3cr3t-chap-pass"

    def failing(request: dict[str, Any]) -> dict[str, Any]:
        raise ValueError(f"cannot parse {request['steps'][0]['secrets'][0]!r}")

    monkeypatch.setattr(remirror.agent, "handle", failing)
    client = AgentClient("here", Site(host="local"))
    with pytest.raises(SiteError) as caught:
        client.request({"op": "run", "steps": [{"kind": "x", "secrets": [secret]}]}, secrets=[secret])
    assert secret not in str(caught.value), str(caught.value)
    assert "cannot parse" in str(caught.value)
    assert caught.value.__context__ is None  # nor is the original error attached to it

    def chained(request: dict[str, Any]) -> dict[str, Any]:
        try:
            raise KeyError(request["steps"][0]["secrets"][0])
        except KeyError:
            raise ValueError("no such step") from None  # its context still holds the secret

    monkeypatch.setattr(remirror.agent, "handle", chained)
    with pytest.raises(SiteError) as caught:
        client.request({"op": "run", "steps": [{"kind": "x", "secrets": [secret]}]}, secrets=[secret])
    assert secret not in "".join(traceback.format_exception(caught.value, chain=True))
    assert caught.value.__context__ is None
