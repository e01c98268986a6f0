"""The SSH runner against a real sshd on loopback.

CI installs openssh-server; these tests start their own sshd on a free
loopback port with its own host key and authorized key, so nothing of the
machine's own SSH setup is used or changed.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from remirror.errors import CommandError, CommandTimeout, SiteUnreachable
from remirror.profile import Site, parse_profile
from remirror.runner.sites import runner_for_site
from remirror.runner.ssh import SshRunner, SshStream

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


@dataclass(frozen=True)
class Sshd:
    port: int
    user: str
    identity_file: str
    known_hosts: str
    tmp: Path


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    assert Path(SSHD).exists(), "sshd is missing: install openssh-server (./dev setup does)"
    tmp = tmp_path_factory.mktemp("sshd")
    _keygen(tmp / "host_key")
    _keygen(tmp / "client_key")
    (tmp / "authorized_keys").write_text((tmp / "client_key.pub").read_text())
    port = _free_port()
    (tmp / "known_hosts").write_text(f"[127.0.0.1]:{port} {(tmp / 'host_key.pub').read_text()}")
    (tmp / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {tmp / 'host_key'}\n"
        f"AuthorizedKeysFile {tmp / 'authorized_keys'}\nPidFile {tmp / 'sshd.pid'}\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\n"
        "PermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\n"
    )
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation directory
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(tmp / "sshd_config")], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "sshd exited"
            time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("sshd did not start listening within 10s")
    yield Sshd(port, getpass.getuser(), str(tmp / "client_key"), str(tmp / "known_hosts"), tmp)
    proc.terminate()
    proc.wait(timeout=5)


def runner(sshd: Sshd, **overrides: object) -> SshRunner:
    options: dict[str, object] = {
        "host": "127.0.0.1",
        "port": sshd.port,
        "user": sshd.user,
        "identity_file": sshd.identity_file,
        "known_hosts": sshd.known_hosts,
        "connect_timeout": 5.0,
    }
    options.update(overrides)
    return SshRunner("dr", **options)  # type: ignore[arg-type]


def test_runs_an_argv_remotely_without_shell_interpretation(sshd: Sshd) -> None:
    remote = runner(sshd)
    try:
        done = remote.run(["printf", "%s|", "a b", "$HOME", "*", "it's"])
        assert done.stdout == "a b|$HOME|*|it's|"
        assert remote.run(["sh", "-c", 'echo "$LC_ALL"']).stdout.strip() == "C"
        assert remote.run(["cat"], stdin="through stdin").stdout == "through stdin"
    finally:
        remote.close()


def test_a_remote_failure_carries_site_code_and_stderr(sshd: Sshd) -> None:
    remote = runner(sshd)
    try:
        with pytest.raises(CommandError) as caught:
            remote.run(["sh", "-c", "echo nope >&2; exit 4"])
        assert (caught.value.site, caught.value.returncode, caught.value.stderr_tail) == ("dr", 4, "nope")
        # The connection survives a failed command.
        assert remote.run(["true"]).ok
    finally:
        remote.close()


def test_a_remote_command_past_its_timeout(sshd: Sshd) -> None:
    remote = runner(sshd)
    try:
        with pytest.raises(CommandTimeout):
            remote.run(["sleep", "30"], timeout=0.5)
    finally:
        remote.close()


def test_a_wrong_key_is_refused_clearly(sshd: Sshd) -> None:
    _keygen(sshd.tmp / "stranger_key")
    with pytest.raises(SiteUnreachable) as caught:
        runner(sshd, identity_file=str(sshd.tmp / "stranger_key")).run(["true"])
    assert str(caught.value) == (
        f"site dr: SSH authentication as {sshd.user}@127.0.0.1:{sshd.port} failed (key: {sshd.tmp / 'stranger_key'})"
    )


def test_an_unknown_host_key_is_refused(sshd: Sshd) -> None:
    empty = sshd.tmp / "empty_known_hosts"
    empty.write_text("")
    with pytest.raises(SiteUnreachable, match=r"is not in .*empty_known_hosts: refusing to connect"):
        runner(sshd, known_hosts=str(empty)).run(["true"])


def test_a_changed_host_key_is_refused(sshd: Sshd) -> None:
    _keygen(sshd.tmp / "other_host_key")
    wrong = sshd.tmp / "wrong_known_hosts"
    wrong.write_text(f"[127.0.0.1]:{sshd.port} {(sshd.tmp / 'other_host_key.pub').read_text()}")
    with pytest.raises(SiteUnreachable, match=r"does not match .*someone is in the middle"):
        runner(sshd, known_hosts=str(wrong)).run(["true"])


def test_an_unreachable_site_fails_fast_in_one_line() -> None:
    closed_port = _free_port()
    started = time.monotonic()
    with pytest.raises(SiteUnreachable) as caught:
        SshRunner("dr", host="127.0.0.1", port=closed_port, connect_timeout=3).run(["true"])
    assert time.monotonic() - started < 3
    assert str(caught.value).startswith(f"site dr: cannot connect to root@127.0.0.1:{closed_port}:")
    assert "\n" not in str(caught.value)


def loopback_site(sshd: Sshd, ssh_options: str = "") -> Site:
    """Site `dr` of a profile, reached over SSH at the loopback sshd (`ssh_options`: more of its
    `ssh` mapping, `, key: value` each)."""
    profile = parse_profile(
        f"""\
version: 1
name: t
sites:
  hq: {{host: local}}
  dr:
    host: ssh://{sshd.user}@127.0.0.1:{sshd.port}
    ssh: {{identity_file: {sshd.identity_file}, known_hosts: {sshd.known_hosts}{ssh_options}}}
mirrors:
  - name: m
    primary: {{site: hq, disk: /dev/sda}}
    replicas: [{{site: dr, disk: /dev/sdb, portal: 127.0.0.1}}]
"""
    )
    return profile.sites["dr"]


def test_a_profile_site_gets_an_ssh_runner_with_its_options(sshd: Sshd) -> None:
    remote = runner_for_site("dr", loopback_site(sshd, ", connect_timeout: 4s"))
    assert isinstance(remote, SshRunner)
    assert remote.connect_timeout == 4
    try:
        assert remote.run(["echo", "hello"]).stdout == "hello\n"
    finally:
        remote.close()
    assert runner_for_site("hq", Site(host="local")).run(["true"]).site == "hq"


def test_a_stream_answers_each_line_from_one_remote_process(sshd: Sshd) -> None:
    remote = runner(sshd)
    try:
        counter = 'n=0; while read line; do n=$((n+1)); echo "$n:$line"; done'
        stream = remote.open_stream(["sh", "-c", counter])
        assert stream.exchange("first", 5.0, []) == "1:first"
        assert stream.exchange('{"op": "observe"}', 5.0, []) == '2:{"op": "observe"}'  # the same process
        stream.close()
    finally:
        remote.close()


def test_a_stream_whose_command_ended_says_how_without_secrets(sshd: Sshd) -> None:
    remote = runner(sshd)
    try:
        stream = remote.open_stream(["sh", "-c", "read line; echo one; echo failed for pw-1234 >&2; exit 3"])
        assert stream.exchange("x", 5.0, []) == "one"
        time.sleep(1)  # it has ended before the next request: its channel is closed (a race CI met)
        with pytest.raises(CommandError) as caught:
            stream.exchange("y", 5.0, ["pw-1234"])
        assert caught.value.returncode == 3
        assert caught.value.stderr_tail == "failed for <redacted>"
        with pytest.raises(CommandTimeout):
            remote.open_stream(["sleep", "30"]).exchange("z", 0.5, [])
    finally:
        remote.close()


RECORDED = Path(__file__).parent / "fixtures" / "openssh-9.2"  # README.md there: how they were made


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("unknown-host.txt", "host 192.0.2.2 is not in /k: refusing to connect to an unverified host"),
        ("changed-host.txt", "host key of 192.0.2.2 does not match /k: refusing to connect"),
        ("wrong-key.txt", "SSH authentication as root@192.0.2.2:22 failed (key: /id)"),
        ("refused.txt", "cannot connect to root@192.0.2.2:22: Connection refused"),
        ("unresolved.txt", "cannot connect to root@192.0.2.2:22: Name or service not known"),
        ("timed-out.txt", "cannot connect to root@192.0.2.2:22: timed out"),
        ("remote-exit-255.txt", None),  # the remote command's own exit status
    ],
)
def test_what_ssh_printed_is_read_as_one_line_why(fixture: str, expected: str | None) -> None:
    from remirror.runner.ssh import ssh_failure

    found = ssh_failure((RECORDED / fixture).read_text(), "root@192.0.2.2:22", "/id", "/k")
    if expected is None:
        assert found is None
    else:
        assert found is not None
        assert found.startswith(expected), found
        assert "\n" not in found
        assert "\r" not in found


def test_a_remote_command_that_exits_255_is_its_own_failure_not_the_links(sshd: Sshd) -> None:
    remote = runner(sshd)
    with pytest.raises(CommandError) as caught:
        remote.run(["sh", "-c", "echo 'mdadm: oops' >&2; exit 255"])
    assert (caught.value.returncode, caught.value.stderr_tail) == (255, "mdadm: oops")


def test_the_ssh_command_line_takes_every_setting_from_the_profile() -> None:
    argv = SshRunner("dr", host="dr.example", port=2222, identity_file="/id", known_hosts="/k").ssh_argv(
        ["remirror", "agent", "--serve"]
    )
    assert argv[:3] == ["ssh", "-F", "/dev/null"]  # no ssh_config: the profile is the whole truth
    for option in (
        "-oBatchMode=yes",
        "-oStrictHostKeyChecking=yes",
        "-oUserKnownHostsFile=/k",
        "-oGlobalKnownHostsFile=/dev/null",
        "-oIdentityFile=/id",
        "-oIdentitiesOnly=yes",
    ):
        assert option in argv
    assert argv[-3:-1] == ["--", "dr.example"]
    assert argv[-1].endswith(" remirror agent --serve")
    assert argv[-1].startswith("env LC_ALL=C LANG=C ")


def test_a_site_behind_a_bastion_is_reached_through_it_with_the_profiles_settings(sshd: Sshd) -> None:
    # The loopback sshd is both the bastion and the site: the connection goes through `-W`.
    from remirror.profile.types import SshAddress

    jump = SshAddress(sshd.user, "127.0.0.1", sshd.port)
    remote = runner(sshd, jump=jump)
    try:
        assert remote.run(["echo", "through the bastion"]).stdout == "through the bastion\n"
    finally:
        remote.close()
    argv = remote.ssh_argv(["true"])
    (proxy,) = [a for a in argv if a.startswith("-oProxyCommand=")]
    assert proxy.startswith("-oProxyCommand=ssh -F /dev/null -oBatchMode=yes")
    assert f"-oUserKnownHostsFile={sshd.known_hosts}" in proxy  # the bastion's key checked too
    assert f"-W '%h:%p' -p {sshd.port} -l {sshd.user} -- 127.0.0.1" in proxy
    # A bastion whose host key the profile's known_hosts lacks is refused like any site.
    stranger = runner(sshd, jump=SshAddress(sshd.user, "localhost", sshd.port))
    with pytest.raises(SiteUnreachable):
        stranger.run(["true"])


def test_a_profile_names_its_bastion_as_an_ssh_address() -> None:
    from remirror.errors import ProfileError

    text = (
        "version: 1\nname: p\nsites:\n  a: {host: local}\n"
        "  b:\n    host: ssh://root@10.0.0.2\n    ssh: {proxy_jump: %s}\n"
        "mirrors:\n  - name: m\n    device: /dev/md/m\n    primary: {site: a, disk: /dev/a0}\n"
        "    replicas: [{site: b, disk: /dev/b0, portal: 10.0.0.2:3260}]\n"
        "    replication: {mode: sync}\n"
    )
    site = parse_profile(text % "ssh://admin@bastion.example:2222").sites["b"]
    remote = runner_for_site("b", site)
    assert isinstance(remote, SshRunner)
    assert (remote.jump.user, remote.jump.host, remote.jump.port) == ("admin", "bastion.example", 2222)  # type: ignore[union-attr]
    with pytest.raises(ProfileError, match="proxy_jump"):
        parse_profile(text % "bastion.example")


def test_a_site_without_remirror_is_named_with_where_it_was_looked_for(
    sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from remirror.agent.client import AgentClient
    from remirror.errors import SiteError
    from remirror.runner.base import BASE_ENV, INSTALL_DIRS

    # The role's venv and pipx's place are on the remote PATH, after the system's.
    assert BASE_ENV["PATH"].split(":")[-2:] == list(INSTALL_DIRS)
    # A site where remirror is nowhere (ssh and env are in /usr/bin: this host is both ends).
    monkeypatch.setitem(BASE_ENV, "PATH", f"{tmp_path}:/usr/bin:/bin")
    client = AgentClient("dr", loopback_site(sshd))
    try:
        with pytest.raises(SiteError, match=r"site dr: remirror is not installed there \(looked for in"):
            client.observe([])
    finally:
        client.close()


def test_a_process_keeps_its_agent_between_commands_without_its_locks(
    sshd: Sshd, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A second command of the same process takes up the agent the first one kept (one ssh,
    one Python start at the site), the first one's lock let go; an agent that ended meanwhile
    is replaced by a new one, and the command does not notice; one whose request was cut short
    is never kept."""
    import sys

    from remirror.agent import client as client_module
    from remirror.agent.client import AgentClient
    from remirror.runner.base import BASE_ENV

    # The agent this checkout's venv runs (this host is both ends), gated as another host's,
    # with locks of its own (not this host's).
    monkeypatch.setitem(BASE_ENV, "PATH", f"{Path(sys.executable).parent}:/usr/bin:/bin")
    monkeypatch.setitem(BASE_ENV, "REMIRROR_LOCK_DIR", str(tmp_path / "locks"))
    started: list[list[str]] = []
    open_stream = SshRunner.open_stream

    def counted(self: SshRunner, argv: list[str]) -> SshStream:
        started.append(argv)
        return open_stream(self, argv)

    monkeypatch.setattr(SshRunner, "open_stream", counted)
    monkeypatch.setattr(client_module._kept_agents, "enabled", True)  # as the lab's tests ask
    site = loopback_site(sshd)
    lock = {"op": "lock", "name": "site", "holder": "a test", "wait": 0}

    first = AgentClient("dr", site)
    first.lock("site", "the first command", 0)
    first.close()
    second = AgentClient("dr", site)
    # Taken, not already held: the first command let go of it (the same agent answers both).
    assert second.request(lock)["locked"] is True
    assert len(started) == 1
    stream = second._stream
    second.request({"op": "unlock", "name": "site"})
    second.close()

    assert stream is not None
    stream._proc.kill()  # the kept agent's connection ends (a site restarted, a link lost)
    stream._proc.wait()
    third = AgentClient("dr", site)
    assert third.request({"op": "sink", "data": ""})["received"] == 0
    assert len(started) == 2
    third.close()

    fourth = AgentClient("dr", site)
    assert fourth.request({"op": "sink", "data": "abc"})["received"] == 3  # the third's agent
    assert len(started) == 2
    taken = fourth._stream
    assert taken is not None

    def interrupted(*_: object) -> str:
        raise KeyboardInterrupt

    taken.exchange = interrupted  # type: ignore[method-assign,assignment]
    with pytest.raises(KeyboardInterrupt):
        fourth.request({"op": "sink", "data": ""})
    assert fourth._stream is None
    fourth.close()
    assert not client_module._kept_agents._kept.get(fourth._stream_key)
