"""Run commands on a remote site over SSH (paramiko).

Host keys are checked against a known_hosts file and an unknown host is
refused: the controller sends CHAP secrets and root commands down this
channel. Key authentication only; no passwords are read from anywhere.
"""

from __future__ import annotations

import contextlib
import select
import shlex
import socket
import sys
import time

from remirror.errors import CommandError, SiteUnreachable
from remirror.runner.base import BASE_ENV, Runner, redact, stderr_tail

# paramiko imports invoke only to run the `Match exec` lines of an ssh_config,
# which remirror never reads (every connection setting comes from the profile).
# That import costs more than all the rest of paramiko's: every `remirror`
# command that reaches a remote site pays it. None in sys.modules makes the
# import fail, which paramiko expects and handles.
sys.modules.setdefault("invoke", None)  # type: ignore[arg-type]

import paramiko  # noqa: E402 - after the line above

KEEPALIVE_SECONDS = 15
_CHUNK = 65536


class SshRunner(Runner):
    """Runs commands on a remote site through one SSH connection, opened on first use."""

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
    ) -> None:
        super().__init__(site)
        self.host = host
        self.port = port
        self.user = user
        self.identity_file = identity_file
        self.known_hosts = known_hosts
        self.connect_timeout = connect_timeout
        self._client: paramiko.SSHClient | None = None

    @property
    def address(self) -> str:
        """user@host:port, as shown in messages."""
        return f"{self.user}@{self.host}:{self.port}"

    def connect(self) -> None:
        """Open the connection now (a no-op if open); raise SiteUnreachable on failure."""
        if self._client is not None:
            return
        client = paramiko.SSHClient()
        try:
            if self.known_hosts:
                client.load_host_keys(self.known_hosts)
            else:
                client.load_system_host_keys()
        except OSError as error:
            raise SiteUnreachable(
                self.site, f"cannot read known_hosts {self.known_hosts}: {error.strerror}"
            ) from None
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        use_default_keys = self.identity_file is None
        try:
            client.connect(
                self.host,
                port=self.port,
                username=self.user,
                key_filename=self.identity_file,
                timeout=self.connect_timeout,
                banner_timeout=self.connect_timeout,
                auth_timeout=self.connect_timeout,
                allow_agent=use_default_keys,
                look_for_keys=use_default_keys,
            )
        except paramiko.BadHostKeyException:
            client.close()
            raise SiteUnreachable(
                self.site,
                f"host key of {self.host} does not match {self._known_hosts_name()}:"
                " refusing to connect (the host was reinstalled, or someone is in the middle)",
            ) from None
        except paramiko.AuthenticationException:
            client.close()
            key = self.identity_file or "default keys"
            raise SiteUnreachable(
                self.site, f"SSH authentication as {self.address} failed (key: {key})"
            ) from None
        except paramiko.SSHException as error:
            client.close()
            if "not found in known_hosts" in str(error):
                raise SiteUnreachable(
                    self.site,
                    f"host {self.host} is not in {self._known_hosts_name()}: refusing to connect"
                    " to an unverified host (check its fingerprint, then add it with ssh-keyscan)",
                ) from None
            raise SiteUnreachable(self.site, f"SSH to {self.address} failed: {error}") from None
        except (OSError, EOFError) as error:
            client.close()
            reason = (
                "timed out"
                if isinstance(error, socket.timeout | TimeoutError)
                else (getattr(error, "strerror", None) or str(error) or type(error).__name__)
            )
            raise SiteUnreachable(self.site, f"cannot connect to {self.address}: {reason}") from None
        transport = client.get_transport()
        if transport is not None:
            transport.set_keepalive(KEEPALIVE_SECONDS)
        self._client = client

    def _known_hosts_name(self) -> str:
        return self.known_hosts or "~/.ssh/known_hosts"

    def _execute(
        self, argv: list[str], stdin: str | None, timeout: float, shown: tuple[str, ...]
    ) -> tuple[int, str, str]:
        self.connect()
        try:
            channel = self._start(argv)
            if stdin is not None:
                channel.sendall(stdin.encode())
            channel.shutdown_write()
            return self._collect(channel, timeout, shown)
        except (paramiko.SSHException, OSError, EOFError) as error:
            raise self._connection_failed(error) from None

    def _start(self, argv: list[str]) -> paramiko.Channel:
        """A channel running `argv` on the site (the connection is open)."""
        transport = self._client.get_transport() if self._client is not None else None
        if transport is None or not transport.is_active():
            self.close()
            raise SiteUnreachable(self.site, f"SSH connection to {self.address} was lost")
        # The remote sshd hands a string to the login shell: quote every
        # argument, and set the same environment the local runner uses.
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in BASE_ENV.items())
        channel = transport.open_session(timeout=self.connect_timeout)
        channel.exec_command(f"env {env} {shlex.join(argv)}")
        return channel

    def open_stream(self, argv: list[str]) -> SshStream:
        """Start `argv` on the site, to exchange lines with it for as long as it runs."""
        self.connect()
        try:
            return SshStream(self, self._start(argv), tuple(argv))
        except (paramiko.SSHException, OSError, EOFError) as error:
            raise self._connection_failed(error) from None

    def _connection_failed(self, error: Exception) -> SiteUnreachable:
        """The connection failed under a command: drop it (the next command reconnects); the error."""
        self.close()
        return SiteUnreachable(self.site, f"SSH connection to {self.address} failed: {error}")

    def _collect(
        self, channel: paramiko.Channel, timeout: float, shown: tuple[str, ...]
    ) -> tuple[int, str, str]:
        deadline = time.monotonic() + timeout
        out: list[bytes] = []
        err: list[bytes] = []
        try:
            while True:
                while channel.recv_ready():
                    out.append(channel.recv(_CHUNK))
                while channel.recv_stderr_ready():
                    err.append(channel.recv_stderr(_CHUNK))
                if (
                    channel.exit_status_ready()
                    and not channel.recv_ready()
                    and not channel.recv_stderr_ready()
                ):
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self._timed_out(shown, timeout, b"".join(err).decode(errors="replace"))
                select.select([channel], [], [], min(remaining, 1.0))
            returncode = channel.recv_exit_status()
        finally:
            channel.close()
        return returncode, b"".join(out).decode(errors="replace"), b"".join(err).decode(errors="replace")

    def close(self) -> None:
        """Close the SSH connection."""
        if self._client is not None:
            self._client.close()
            self._client = None


class SshStream:
    """A remote command that answers each line it is sent with one line (`remirror agent --serve`).

    One process for many requests: the controller's requests to a site
    (observe, each batch of steps, observe again) cost one remote start.
    """

    def __init__(self, runner: SshRunner, channel: paramiko.Channel, argv: tuple[str, ...]) -> None:
        self._runner = runner
        self._channel = channel
        self._argv = argv
        self._pending = b""
        self._err = b""  # the tail of its stderr, drained as it comes (a full window would stall it)

    def exchange(self, line: str, timeout: float, secrets: list[str]) -> str:
        """Send `line`, return the answer line; CommandTimeout, or CommandError if the command ended."""
        try:
            self._send(line, secrets)
            deadline = time.monotonic() + timeout
            while b"\n" not in self._pending:
                if self._channel.recv_stderr_ready():
                    self._stderr()
                    continue
                if self._channel.recv_ready():
                    self._pending += self._channel.recv(_CHUNK)
                    continue
                if self._channel.exit_status_ready() or self._channel.closed:
                    raise self._ended(secrets)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self._runner._timed_out(self._argv, timeout, self._stderr())
                select.select([self._channel], [], [], min(remaining, 1.0))
        except (paramiko.SSHException, OSError, EOFError) as error:
            raise self._runner._connection_failed(error) from None
        answer, self._pending = self._pending.split(b"\n", 1)
        return answer.decode(errors="replace")

    def _send(self, line: str, secrets: list[str]) -> None:
        try:
            self._channel.sendall(line.encode() + b"\n")
        except (paramiko.SSHException, OSError):
            # The command ended before this request (its channel is closed): say how it
            # ended, as when it ends while we wait, rather than that the connection failed.
            if self._channel.exit_status_ready():
                raise self._ended(secrets) from None
            raise

    def _stderr(self) -> str:
        """Its stderr's tail, with whatever has arrived drained."""
        while self._channel.recv_stderr_ready():
            self._err = (self._err + self._channel.recv_stderr(_CHUNK))[-_CHUNK:]
        return self._err.decode(errors="replace")

    def _ended(self, secrets: list[str]) -> CommandError:
        code = self._channel.recv_exit_status()
        return CommandError(self._runner.site, self._argv, code, redact(stderr_tail(self._stderr()), secrets))

    def close(self) -> None:
        """Close its stdin (it ends) and the channel."""
        with contextlib.suppress(paramiko.SSHException, OSError, EOFError):  # gone already: as good
            self._channel.shutdown_write()
        self._channel.close()
