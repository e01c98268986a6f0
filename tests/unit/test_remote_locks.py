"""Another host's controller's hold of a site's lock: a lease (remirror.agent.lock.LEASE_SECONDS)
that lapses when the controller sends nothing for that long, which the controller keeps alive
between its requests (remirror.agent.client); and ended by a forced promotion at the site
(remirror.agent.remote_holders). Real agents, started as SSH starts them."""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from pathlib import Path

import pytest

from remirror.agent import lock
from remirror.agent.client import AgentClient
from remirror.agent.remote_holders import end_remote_holders, remote_holders
from remirror.errors import SiteError
from remirror.profile.model import Site
from remirror.runner.ssh import SshStream
from tests.unit.test_agent import STOP, _ask, _serve

# Leases long enough for a loaded test machine's scheduling, short enough for a unit test.
LEASE = 3.0
IDLE = 2 * LEASE  # a controller silent for so long has surely lost a lease of LEASE


@pytest.fixture
def lock_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(lock, "LOCK_DIR", tmp_path / "locks")  # where the agents of _serve lock
    return tmp_path / "locks"


def _held_by_another(name: str = "site") -> bool:
    """Whether another process holds lock `name` (this one takes and lets go of it if not)."""
    try:
        lock.take(name, "the site's own operator")
    except lock.Busy:
        return True
    lock.release(name)
    return False


def test_a_silent_controller_loses_its_hold_and_its_agent_ends(tmp_path: Path, lock_dir: Path) -> None:
    agent = _serve(tmp_path, lease=LEASE)
    try:
        assert _ask(agent, {"op": "lock", "name": "site", "holder": "remirror apply"})["lease"] == LEASE
        assert _held_by_another()
        assert agent.wait(timeout=60) == 1  # it sent nothing: the agent ends, and its lock with it
        stderr = agent.stderr.read() if agent.stderr else ""
        assert f"sent nothing for {LEASE:g} s while holding this site's site lock: its hold lapsed" in stderr
        assert not _held_by_another()
    finally:
        agent.kill()


def test_requests_and_a_request_running_past_the_lease_keep_the_hold(tmp_path: Path, lock_dir: Path) -> None:
    # md_stop, at this "site", sleeps past the lease: the request running counts as the controller's.
    agent = _serve(tmp_path, stop_script=f"sleep {IDLE}", lease=LEASE)
    try:
        assert _ask(agent, {"op": "lock", "name": "site", "holder": "remirror apply"})["locked"] is True
        results = _ask(agent, {"op": "run", "steps": [STOP]})["results"]
        assert isinstance(results, list)
        assert results[0]["ok"] is True
        for _ in range(int(IDLE / (LEASE / 4))):  # a request more often than the lease
            assert _ask(agent, {"op": "sink", "data": ""})["received"] == 0
            time.sleep(LEASE / 4)
        assert agent.poll() is None
        assert _held_by_another()
    finally:
        agent.kill()
        agent.wait(timeout=30)


def _client_of(agent: subprocess.Popen[bytes]) -> AgentClient:
    """A controller's client whose stream to site `dr` is `agent` (SSH is not the subject)."""
    client = AgentClient("dr", Site(host="ssh://root@dr.example"))
    client._stream = SshStream(client._runner, agent, ("remirror", "agent", "--serve"))  # type: ignore[arg-type]
    return client


def _serve_bytes(tmp_path: Path) -> subprocess.Popen[bytes]:
    agent: subprocess.Popen[bytes] = _serve(tmp_path, lease=LEASE, text=False)
    return agent


def test_the_controller_keeps_its_hold_alive_while_it_works_elsewhere(tmp_path: Path, lock_dir: Path) -> None:
    agent = _serve_bytes(tmp_path)
    client = _client_of(agent)
    try:
        client.lock("site", "remirror apply (pid 7 on a)", 0)
        time.sleep(IDLE)  # the controller proves a disk blank at another site, or waits for its operator
        assert agent.poll() is None
        assert _held_by_another()
        assert client.request({"op": "sink", "data": "x"})["received"] == 1
        client.unlock("site")  # lets go of the lock, and the keepalives stop
        assert not _held_by_another()
        assert client._keepalive_stop is None
    finally:
        agent.kill()
        agent.wait(timeout=30)


def test_a_hold_that_ended_is_said_and_nothing_more_is_asked_there(tmp_path: Path, lock_dir: Path) -> None:
    agent = _serve_bytes(tmp_path)
    client = _client_of(agent)
    try:
        client.lock("site", "remirror apply", 0)
        agent.kill()  # the link or the site went: the next keepalive fails
        agent.wait(timeout=30)
        deadline = time.monotonic() + 60
        while client.locks and time.monotonic() < deadline:
            time.sleep(0.1)
        # A new agent would not hold the lock: the command stops asking, and says why.
        with pytest.raises(
            SiteError, match="site dr: this command's hold of its lock there ended: its lease"
        ):
            client.observe(["/dev/sdb"])
        client.unlock("site")  # the command lets go of it: it may lock again (a reconciler's next pass)
        assert client._lost is None
        again = _serve_bytes(tmp_path)
        client._stream = SshStream(client._runner, again, ("remirror", "agent", "--serve"))  # type: ignore[arg-type]
        try:
            client.lock("site", "remirror reconcile", 0)
            # The next pass's hold is kept alive too: a keepalive thread runs for it.
            assert any(t.name == "keepalive-dr" and t.is_alive() for t in threading.enumerate())
            client.close()
        finally:
            again.kill()
            again.wait(timeout=30)
    finally:
        agent.kill()
        agent.wait(timeout=30)


FROM_ANOTHER_HOST = {"SSH_CONNECTION": "192.0.2.1 40000 192.0.2.2 22", "SSH_CLIENT": "192.0.2.1 40000 22"}


def test_a_forced_promotion_ends_another_hosts_hold_and_no_remote_controller_locks_meanwhile(
    tmp_path: Path, lock_dir: Path
) -> None:
    remote = _serve(tmp_path, env=FROM_ANOTHER_HOST)
    own = _serve(tmp_path)  # the site's own root started it: one of its own verbs
    late = _serve(tmp_path, env=FROM_ANOTHER_HOST)
    try:
        assert _ask(remote, {"op": "lock", "name": "site", "holder": "remirror apply"})["locked"] is True
        assert _ask(own, {"op": "lock", "name": "cdp-m0.b", "holder": "remirror cdp run"})["locked"] is True
        assert lock.take(lock.FORCED_LOCK, "remirror promote --force")  # what Controller.seize_site_lock does
        assert remote_holders("site") == [remote.pid]  # a look: the operator confirms first
        (ended,) = end_remote_holders("site")
        assert ended == f"pid {remote.pid} (a controller at 192.0.2.1)"
        assert remote.wait(timeout=60) == 1
        assert "this site's forced promotion ended it" in (remote.stderr.read() if remote.stderr else "")
        # Nobody else takes the site's lock meanwhile, the site's own verbs included (an agent
        # that passed the gate before the mark, its lock taken after the look, says busy too).
        answer = _ask(own, {"op": "lock", "name": "site", "holder": "remirror apply", "wait": 1})
        assert "busy: a forced promotion holds its site lock" in str(answer["error"])
        assert lock.take("site", "remirror promote --force", wait=10)
        # Meanwhile another host's controller is refused the lock; the site's own verbs go on.
        answer = _ask(late, {"op": "lock", "name": "site", "holder": "remirror apply", "wait": 5})
        assert "a forced promotion runs at this site" in str(answer["error"])
        assert end_remote_holders("cdp-m0.b") == []  # its own verb's lock: never ended
        assert own.poll() is None
        lock.release(lock.FORCED_LOCK)
        lock.release("site")
        assert _ask(late, {"op": "lock", "name": "site", "holder": "remirror apply"})["locked"] is True
    finally:
        for agent in (remote, own, late):
            agent.kill()
            agent.wait(timeout=30)
        for name in (lock.FORCED_LOCK, "site"):
            lock.release(name)


def test_an_agent_whose_controller_stopped_reading_still_ends_at_the_forced_promotions_word(
    tmp_path: Path, lock_dir: Path
) -> None:
    # The controller holds the lock, then reads nothing more: the agent's stdout and stderr fill
    # and it blocks writing. SIGTERM still ends it (its last words never block).
    agent = _serve(tmp_path, env=FROM_ANOTHER_HOST, text=False)
    try:
        stdin = agent.stdin
        assert stdin is not None
        lines = b'{"op": "lock", "name": "site", "holder": "remirror apply"}\n'
        lines += b"not json, refused and logged on stderr\n" * 5000

        def send() -> None:  # it blocks once the agent blocks: beside the test
            with contextlib.suppress(OSError):
                stdin.write(lines)
                stdin.flush()

        threading.Thread(target=send, daemon=True).start()
        deadline = time.monotonic() + 60
        while remote_holders("site") != [agent.pid]:
            assert time.monotonic() < deadline, "the agent never took the lock"
            time.sleep(0.1)
        time.sleep(1)  # it writes until both pipes are full
        assert lock.take(lock.FORCED_LOCK, "remirror promote --force")
        assert len(end_remote_holders("site")) == 1
        assert agent.wait(timeout=60) == 1
        assert lock.take("site", "remirror promote --force", wait=10)
    finally:
        agent.kill()
        agent.wait(timeout=30)
        for name in (lock.FORCED_LOCK, "site"):
            lock.release(name)
