"""One host of the hosts' lab: a QEMU VM of its own, booted, cut off and powered off from here.

A host is its own machine: its own kernel (the image's), systemd as init, its own system disk
(a copy of the image, kept across its reboots: /etc and /var persist), its data and cache
disks, and a NIC on each link to another host. A link is a pair of Unix datagram sockets
(QEMU's `dgram` network backend): a frame sent while the other end is off is lost, as on a
cable to a host without power, and the link works again when that host boots. Nothing leaves
this machine: the links join only these VMs, and the control link is QEMU's user-mode
network with `restrict=on` (no route out), which forwards one port on 127.0.0.1 to the
host's sshd, for the test runner.

A power cut is SIGKILL of QEMU: no shutdown runs, the guest's page cache is lost, and what
QEMU had written to the disk files (what the guest's disks had completed) stays, as on disks
without a volatile cache. A boot is a new QEMU on the same disk files.
"""

from __future__ import annotations

import contextlib
import shlex
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from remirror.lab.hosts.image import ROOT_LABEL

QEMU = "qemu-system-x86_64"
CONTROL_MAC = "52:54:00:00:00:99"
BOOT_TIMEOUT = 300.0
SSH_TIMEOUT = 600.0


class HostError(RuntimeError):
    """A host did not boot, or a command on it failed."""


@dataclass(frozen=True)
class Nic:
    """This host's end of a link: the QEMU netdev id, its MAC, address, and the two sockets."""

    netdev: str
    mac: str
    address: str  # ADDRESS/PREFIX
    local: Path
    remote: Path


@dataclass
class Host:
    """A VM of the hosts' lab; `boot`, `power_cut`, `run` as root over the control link."""

    name: str
    work: Path
    image: dict[str, Path]
    disks: dict[str, int]  # virtio serial -> size in bytes
    memory: str = "1G"
    nics: list[Nic] = field(default_factory=list)
    peers: dict[str, str] = field(default_factory=dict)  # host name -> its address seen from here
    proc: subprocess.Popen[bytes] | None = None
    port: int = 0
    boots: int = 0

    @property
    def console_log(self) -> Path:
        return self.work / f"{self.name}.console"

    def create_disks(self) -> None:
        """The system disk (a sparse copy of the image) and empty sparse data disks."""
        self.work.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["cp", "--sparse=always", str(self.image["root"]), str(self._disk_file("system"))], check=True
        )
        for serial, size in self.disks.items():
            with self._disk_file(serial).open("wb") as handle:
                handle.truncate(size)

    def _disk_file(self, serial: str) -> Path:
        return self.work / f"{self.name}-{serial}.img"

    def _argv(self) -> list[str]:
        cmdline = [
            f"root=LABEL={ROOT_LABEL}", "rw", "console=ttyS0", "net.ifnames=0", "mitigations=off",
            f"lab.name={self.name}",
            *(f"lab.link={nic.mac},{nic.address}" for nic in self.nics),
            *(f"lab.peer={peer},{address}" for peer, address in self.peers.items()),
        ]  # fmt: skip
        argv = [
            QEMU, "-accel", "tcg", "-m", self.memory, "-smp", "1", "-nographic", "-no-reboot",
            "-nodefaults", "-chardev", f"file,id=console,path={self.console_log},append=on",
            "-serial", "chardev:console",
            # QEMU's monitor, for whoever debugs a host (socat - unix:WORK/NAME.monitor).
            "-monitor", f"unix:{self.work / (self.name + '.monitor')},server=on,wait=off",
            "-kernel", str(self.image["kernel"]), "-initrd", str(self.image["initrd"]),
            "-append", " ".join(cmdline),
            "-netdev", f"user,id=control,restrict=on,hostfwd=tcp:127.0.0.1:{self.port}-:22",
            "-device", f"virtio-net-pci,netdev=control,mac={CONTROL_MAC}",
        ]  # fmt: skip
        # cache=unsafe: QEMU writes to the files at once (a power cut keeps what the guest's disk
        # completed) and the host's flushes are skipped, which only the host's own crash would need.
        for serial in ("system", *self.disks):
            argv += [
                "-drive", f"file={self._disk_file(serial)},if=none,id={serial},format=raw,cache=unsafe",
                "-device", f"virtio-blk-pci,drive={serial},serial={serial}",
            ]  # fmt: skip
        for nic in self.nics:
            argv += [
                "-netdev", f"dgram,id={nic.netdev},local.type=unix,local.path={nic.local},"
                f"remote.type=unix,remote.path={nic.remote}",
                "-device", f"virtio-net-pci,netdev={nic.netdev},mac={nic.mac}",
            ]  # fmt: skip
        return argv

    def start(self) -> None:
        """Power on: a new QEMU on the same disks. Returns at once; `wait_up` waits for sshd."""
        if self.proc is not None and self.proc.poll() is None:
            raise HostError(f"{self.name} is already running")
        self.port = _free_port()
        for nic in self.nics:
            nic.local.unlink(missing_ok=True)  # the socket of the last boot, gone with its QEMU
        with self.console_log.open("ab") as log:
            log.write(f"\n===== boot {self.boots + 1} of {self.name} =====\n".encode())
        self.proc = subprocess.Popen(
            self._argv(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        self.boots += 1

    def wait_up(self, timeout: float = BOOT_TIMEOUT) -> float:
        """Wait until root logs in over the control link; return the seconds it took."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if self.proc is None or self.proc.poll() is not None:
                raise HostError(f"{self.name}: QEMU ended while booting: {self._qemu_error()}")
            if self.run("true", check=False, timeout=20).returncode == 0:
                return time.monotonic() - started
            time.sleep(2)
        raise HostError(f"{self.name} did not boot in {timeout:.0f}s (console: {self.console_log})")

    def boot(self) -> float:
        self.start()
        return self.wait_up()

    def power_cut(self) -> None:
        """Power off without a shutdown: SIGKILL of QEMU."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def reboot(self) -> float:
        """A clean reboot: systemd stops everything; QEMU (-no-reboot) ends; then a boot."""
        self.run("systemctl reboot", check=False, timeout=30)
        assert self.proc is not None  # noqa: S101 - it was running
        try:
            self.proc.wait(timeout=BOOT_TIMEOUT)
        except subprocess.TimeoutExpired as exc:
            raise HostError(f"{self.name} did not shut down in {BOOT_TIMEOUT:.0f}s") from exc
        self.proc = None
        return self.boot()

    def ssh_argv(self) -> list[str]:
        """ssh to this host as root over the control link; a command follows."""
        return [
            "ssh", "-i", str(self.image["key"]), "-p", str(self.port),
            "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
            "-o", "ConnectTimeout=10", "-o", "BatchMode=yes", "-o", "ServerAliveInterval=15",
            "-o", "ControlMaster=auto", "-o", f"ControlPath={self.work / (self.name + '.ssh')}",
            "-o", "ControlPersist=120", "root@127.0.0.1",
        ]  # fmt: skip

    def run(
        self, command: str, *, check: bool = True, timeout: float = SSH_TIMEOUT, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run a shell command as root on the host; its output, and an error naming it on failure."""
        done = subprocess.run(
            [*self.ssh_argv(), command],
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
            check=False,
        )
        if check and done.returncode != 0:
            said = (done.stderr or done.stdout).strip()[-2000:]
            raise HostError(f"{self.name}: `{command}` exited {done.returncode}: {said}")
        return done

    def put(self, source: Path, dest: str, mode: str = "0644") -> None:
        """Copy a file onto the host (through ssh's stdin: no scp needed on either side)."""
        with source.open("rb") as data:
            subprocess.run(
                [*self.ssh_argv(), f"install -D -m {mode} /dev/stdin {shlex.quote(dest)}"],
                stdin=data, check=True, capture_output=True, timeout=SSH_TIMEOUT,
            )  # fmt: skip
        self.run(f"sync {shlex.quote(dest)}")

    def write(self, dest: str, text: str, mode: str = "0644") -> None:
        """Write a file on the host, synced (as an editor saves it): a power cut keeps it."""
        self.run(
            f"install -D -m {mode} /dev/stdin {shlex.quote(dest)} && sync {shlex.quote(dest)}", input=text
        )

    def _qemu_error(self) -> str:
        if self.proc is None or self.proc.stderr is None:
            return "no output"
        with contextlib.suppress(Exception):
            return self.proc.stderr.read().decode(errors="replace").strip()[-500:] or "no output"
        return "no output"

    def stop(self) -> None:
        self.power_cut()
        (self.work / f"{self.name}.ssh").unlink(missing_ok=True)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
