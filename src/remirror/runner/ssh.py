"""Run commands on a remote site over SSH, with the system's OpenSSH client.

The stock client, not a Python implementation of the protocol: it is what
the administrator already trusts and configures keys for, its crypto is the
distribution's, and it costs a process start instead of a library import and
a handshake in Python (seconds on a small host, half a minute under the
lab's emulation; docs/lab.md, Cost).

Every setting comes from the profile, none from an ssh_config (`-F
/dev/null`): what a profile says is what runs, on every controller. Host
keys are checked against the profile's known_hosts file and an unknown or
changed host is refused: the controller sends CHAP secrets and root
commands down this channel. Key authentication only (BatchMode): nothing
ever prompts.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import shlex
import subprocess
import time

from remirror.errors import CommandError, SiteUnreachable
from remirror.profile.types import SshAddress
from remirror.runner.base import BASE_ENV, Runner, redact, stderr_tail

SSH = "ssh"
# A link that stops answering is noticed within a minute (4 unanswered probes,
# 15 s apart). Not sooner: on a slow WAN a resync can queue seconds of data in
# front of the probe's answer (the same reason the `wan` iSCSI preset waits 30 s).
ALIVE_INTERVAL, ALIVE_COUNT = 15, 4
_CHUNK = 65536
# What ssh itself (not the remote command) exits with when it fails.
SSH_FAILED = 255


class SshRunner(Runner):
    """Runs commands on a remote site, each through its own `ssh` process."""

    def __init__(
        self,
        site: str,
        *,
        host: str,
        port: int = 22,
        user: str = "root",
        identity_file: str | None = None,
        known_hosts: str | None = None,
        connect_timeout: float = 10.0,
        jump: SshAddress | None = None,
    ) -> None:
        super().__init__(site)
        self.host = host
        self.port = port
        self.user = user
        self.identity_file = identity_file
        self.known_hosts = known_hosts
        self.connect_timeout = connect_timeout
        self.jump = jump

    @property
    def address(self) -> str:
        """user@host:port, as shown in messages."""
        return f"{self.user}@{self.host}:{self.port}"

    def ssh_argv(self, argv: list[str]) -> list[str]:
        """The local `ssh` command line that runs `argv` on the site."""
        options = self._options()
        if self.jump is not None:
            # ssh -J would reach the bastion with ssh_config's settings and ~/.ssh/known_hosts:
            # a ProxyCommand of our own reaches it with the profile's (key, known_hosts, no config).
            hop = [
                SSH, "-F", "/dev/null", *(f"-o{key}={value}" for key, value in options.items()),
                "-W", "{target}", "-p", str(self.jump.port), "-l", self.jump.user, "--", self.jump.host,
            ]  # fmt: skip
            # ssh expands %-tokens in a ProxyCommand: a literal % is written %%.
            command = shlex.join(part.replace("%", "%%") for part in hop).replace("{target}", "%h:%p")
            options["ProxyCommand"] = command
        # The remote sshd hands a string to the login shell: quote every
        # argument, and set the same environment the local runner uses.
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in BASE_ENV.items())
        return [
            SSH,
            "-F",
            "/dev/null",
            *(f"-o{key}={value}" for key, value in options.items()),
            "-p",
            str(self.port),
            "-l",
            self.user,
            "--",
            self.host,
            f"env {env} {shlex.join(argv)}",
        ]

    def _options(self) -> dict[str, str]:
        """The client's options, the same for the site and a bastion on the way."""
        options = {
            "BatchMode": "yes",
            "StrictHostKeyChecking": "yes",
            "ConnectTimeout": str(max(1, round(self.connect_timeout))),
            "ServerAliveInterval": str(ALIVE_INTERVAL),
            "ServerAliveCountMax": str(ALIVE_COUNT),
            "ForwardAgent": "no",
            "ForwardX11": "no",
            "RequestTTY": "no",
            "LogLevel": "ERROR",  # refusals and failures, not banners or notices
        }
        if self.known_hosts:
            options |= {"UserKnownHostsFile": self.known_hosts, "GlobalKnownHostsFile": "/dev/null"}
        if self.identity_file:
            options |= {"IdentityFile": self.identity_file, "IdentitiesOnly": "yes", "IdentityAgent": "none"}
        return options

    def _execute(
        self, argv: list[str], stdin: str | None, timeout: float, shown: tuple[str, ...]
    ) -> tuple[int, str, str]:
        try:
            proc = subprocess.run(
                self.ssh_argv(argv),
                **({"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}),
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout,
                env=_client_env(),
                check=False,
            )
        except subprocess.TimeoutExpired as expired:
            stderr = expired.stderr.decode(errors="replace") if isinstance(expired.stderr, bytes) else ""
            raise self._timed_out(shown, timeout, stderr) from None
        except FileNotFoundError:
            raise SiteUnreachable(self.site, f"cannot run {SSH}: install the OpenSSH client") from None
        self._raise_if_ssh_failed(proc.returncode, proc.stderr)
        return proc.returncode, proc.stdout, proc.stderr

    def _raise_if_ssh_failed(self, returncode: int, stderr: str) -> None:
        """SiteUnreachable when ssh itself failed (not the remote command)."""
        if returncode != SSH_FAILED:
            return
        reason = ssh_failure(stderr, self.address, self.identity_file, self.known_hosts)
        if reason is not None:
            raise SiteUnreachable(self.site, reason)

    def open_stream(self, argv: list[str]) -> SshStream:
        """Start `argv` on the site, to exchange lines with it for as long as it runs."""
        try:
            proc = subprocess.Popen(
                self.ssh_argv(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=_client_env(),
            )
        except FileNotFoundError:
            raise SiteUnreachable(self.site, f"cannot run {SSH}: install the OpenSSH client") from None
        return SshStream(self, proc, tuple(argv))


def _client_env() -> dict[str, str]:
    """The ssh client's environment: the C locale (its messages are matched), HOME for its defaults."""
    return {**BASE_ENV, "HOME": os.environ.get("HOME", "/root")}


# ssh's own failures, as OpenSSH 9.2 (Debian 12) words them on stderr, and what
# they mean for the operator. Anything else that exits 255 is the remote
# command's own exit status.
_UNKNOWN_HOST = re.compile(r"No \S+ host key is known for")
_CHANGED_HOST = re.compile(r"REMOTE HOST IDENTIFICATION HAS CHANGED")
_AUTH = re.compile(r"Permission denied \(|Too many authentication failures")
_CONNECT = re.compile(
    r"ssh: connect to host \S+ port \d+: (?P<reason>.+)|ssh: Could not resolve hostname \S+: (?P<dns>.+)"
)
_LOST = re.compile(
    r"Connection (?:closed by|reset by|timed out during banner exchange)|kex_exchange_identification|"
    r"Timeout, server \S+ not responding|client_loop: send disconnect|Broken pipe|"
    r"Connection to \S+ closed by remote host"
)


def ssh_failure(stderr: str, address: str, identity_file: str | None, known_hosts: str | None) -> str | None:
    """Why ssh could not run the command, in one line; None when ssh did not fail (pure)."""
    known = known_hosts or "~/.ssh/known_hosts"
    host = address.split("@", 1)[1].rsplit(":", 1)[0]
    if _CHANGED_HOST.search(stderr):
        return (
            f"host key of {host} does not match {known}:"
            " refusing to connect (the host was reinstalled, or someone is in the middle)"
        )
    if _UNKNOWN_HOST.search(stderr) or "Host key verification failed" in stderr:
        return (
            f"host {host} is not in {known}: refusing to connect to an unverified host"
            " (check its fingerprint, then add it with ssh-keyscan)"
        )
    if _AUTH.search(stderr):
        return f"SSH authentication as {address} failed (key: {identity_file or 'default keys'})"
    connect = _CONNECT.search(stderr)
    if connect is not None:
        reason = (connect.group("reason") or connect.group("dns") or "").strip().rstrip(".")
        return f"cannot connect to {address}: {'timed out' if 'timed out' in reason else reason}"
    if _LOST.search(stderr):
        return f"SSH connection to {address} failed: {stderr_tail(stderr, 1)}"
    return None


class SshStream:
    """A remote command that answers each line it is sent with one line (`remirror agent --serve`).

    One process for many requests: the controller's requests to a site
    (observe, each batch of steps, observe again) cost one connection and
    one remote start.
    """

    def __init__(self, runner: SshRunner, proc: subprocess.Popen[bytes], argv: tuple[str, ...]) -> None:
        if proc.stdin is None or proc.stdout is None or proc.stderr is None:
            raise TypeError("an SshStream needs a process with pipes for stdin, stdout and stderr")
        self._runner = runner
        self._proc = proc
        self._stdin, self._stdout, self._stderr = proc.stdin, proc.stdout, proc.stderr
        self._argv = argv
        self._pending = b""
        self._err = b""  # the tail of its stderr, drained as it comes (a full pipe would stall it)

    def adopt(self, runner: SshRunner) -> None:
        """Taken up by another command's client (remirror.agent.client, _KeptAgents): its
        messages name that client's site, and the stderr of the last command is not carried."""
        self._runner = runner
        self._err = b""

    def exchange(self, line: str, timeout: float, secrets: list[str]) -> str:
        """Send `line`, return the answer line; CommandTimeout, or how the command ended."""
        try:
            self._stdin.write(line.encode() + b"\n")
            self._stdin.flush()
        except (BrokenPipeError, ValueError):  # it ended before this request: say how it ended
            raise self._ended(secrets) from None
        out, err = self._stdout.fileno(), self._stderr.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                said = redact(self._err.decode(errors="replace"), secrets)
                raise self._runner._timed_out(self._argv, timeout, said)
            ready, _, _ = select.select([out, err], [], [], min(remaining, 1.0))
            if err in ready:
                self._drain_stderr(err)
            if out in ready:
                data = os.read(out, _CHUNK)
                if not data:  # it ended without an answer
                    raise self._ended(secrets)
                self._pending += data
        answer, self._pending = self._pending.split(b"\n", 1)
        return answer.decode(errors="replace")

    def _drain_stderr(self, fd: int) -> None:
        data = os.read(fd, _CHUNK)
        if data:
            self._err = (self._err + data)[-_CHUNK:]

    def _ended(self, secrets: list[str]) -> CommandError | SiteUnreachable:
        """How the command ended: ssh's own failure, or the command's exit and stderr."""
        with contextlib.suppress(OSError, ValueError):
            self._err = (self._err + self._stderr.read())[-_CHUNK:]
        code = self._proc.wait()
        stderr = self._err.decode(errors="replace")
        runner = self._runner
        if code == SSH_FAILED:
            reason = ssh_failure(stderr, runner.address, runner.identity_file, runner.known_hosts)
            if reason is not None:
                return SiteUnreachable(runner.site, reason)
        return CommandError(runner.site, self._argv, code, redact(stderr_tail(stderr), secrets))

    def close(self) -> None:
        """Close its pipes: the remote command reads the end of its input and ends, and ssh with it.

        Not waited for: a command's last request has been answered, and the
        far side's exit costs the controller nothing it needs to see.
        """
        for pipe in (self._stdin, self._stdout, self._stderr):
            with contextlib.suppress(OSError, ValueError):
                pipe.close()
