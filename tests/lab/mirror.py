"""What the lab tests of a mirror share: the lab profile's names, and ways to write and check data."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import mmap
import os
import random
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Self

from remirror.agent.client import keep_agents_between_commands
from remirror.lab import probes
from tests.lab.conftest import on_b, sh

# Hundreds of verbs run in this one process: each keeps its remote agents for the next (an SSH
# handshake and a Python start on site B saved per verb; docs/lab.md, Cost).
keep_agents_between_commands()

LAB = str(probes.LAB_PROFILE)
MD = probes.lab_names().md
IQN = probes.lab_names().iqn
PORTAL = probes.lab_names().portal
SLOW = 900  # seconds: apply observes two sites and starts Python on site B, under emulation
MiB = 1024 * 1024


def remirror(*args: str, ok_codes: tuple[int, ...] = (0,)) -> tuple[int, str, str]:
    """A verb on site A, run in this process: (exit code, stdout, stderr), as `remirror ARGS` gives them.

    The CLI's own code runs (click, the verb, its output), but not a new
    Python: under emulation a `remirror` process spends seconds starting and
    importing before it does anything, and these tests are about what the
    verbs do. What only a process shows (daemons and their signals, a verb
    on site B, the Ansible module's calls) is run as one: `remirror_process`.
    """
    from remirror.cli.app import run

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(list(args))
    assert code in ok_codes, f"remirror {' '.join(args)}: exit {code}\n{out.getvalue()}{err.getvalue()}"
    return code, out.getvalue(), err.getvalue()


def remirror_process(*args: str, ok_codes: tuple[int, ...] = (0,)) -> tuple[int, str, str]:
    """`remirror ARGS` as a process on site A (see `remirror`)."""
    done = sh("remirror", *args, ok_codes=ok_codes, timeout=SLOW)
    return done.returncode, done.stdout, done.stderr


def variant(tmp_path: Path, name: str, append: str = "", **replace: str) -> str:
    """A copy of the lab profile with some text replaced (and some appended)."""
    text = Path(LAB).read_text()
    for old, new in replace.items():
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / name
    path.write_text(text + append)
    return str(path)


def reconcile_until_mirrored(timeout: float = 300, profile: str = LAB) -> list[str]:
    """Run passes (as cron or a timer would) until the profile's mirrors are MIRRORED; their first lines."""
    lines = []
    deadline = time.monotonic() + timeout
    while True:
        code, out, _ = remirror("reconcile", profile, ok_codes=(0, 1, 2))
        lines.append(out.strip())
        if code == 0:
            return lines
        assert time.monotonic() < deadline, lines
        time.sleep(5)


def md_sysfs(name: str, device: str = MD) -> str:
    return probes.md_sysfs(name, device)


def write_random(offset: int, size: int, device: str = MD) -> str:
    """Write random bytes through the mirror with O_DIRECT; their sha256."""
    payload = mmap.mmap(-1, size)  # page-aligned, as O_DIRECT wants
    payload.write(os.urandom(size))
    fd = os.open(device, os.O_WRONLY | os.O_DIRECT | os.O_SYNC)
    try:
        assert os.pwrite(fd, payload, offset) == size
    finally:
        os.close(fd)
    return hashlib.sha256(payload).hexdigest()


class Writer:
    """Writes through the mirror in a thread, as an application would, remembering what it wrote.

    Blocks of `block` bytes at random aligned offsets in [offset, offset + size),
    O_DIRECT|O_SYNC: each write returns only once md has it. `check()` reads
    every block back through the mirror and compares with the last write there.
    """

    def __init__(self, offset: int, size: int, block: int = 64 * 1024, seed: int = 0) -> None:
        self.offset, self.size, self.block = offset, size, block
        self.written: dict[int, str] = {}
        self.bytes_written = 0
        self.writes = 0
        self.last_done = time.monotonic()
        self.errors: list[str] = []
        self._random = random.Random(seed)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=SLOW)

    def _run(self) -> None:
        while not self._stop.is_set():
            at = self.offset + self._random.randrange(self.size // self.block) * self.block
            try:
                self.written[at] = write_random(at, self.block)
            except OSError as error:  # under `degrade` md hides a failed leg: never expected
                self.errors.append(f"write at {at}: {error}")
                return
            self.bytes_written += self.block
            self.writes += 1
            self.last_done = time.monotonic()

    def wait_writes(self, count: int, timeout: float = SLOW) -> None:
        """Until `count` more writes have been acknowledged (a workload under way, not a guess in seconds)."""
        target = self.writes + count
        deadline = time.monotonic() + timeout
        while self.writes < target:
            assert not self.errors, self.errors
            assert time.monotonic() < deadline, f"{self.writes} writes, waiting for {target}"
            time.sleep(0.2)

    def check(self) -> None:
        assert not self.errors, self.errors
        assert self.written, "nothing was written"
        for at, digest in self.written.items():
            assert md_digest(at, self.block) == digest, f"block at {at} does not read back as written"


@contextlib.contextmanager
def slowed(ms: int, *disks: str) -> Iterator[None]:
    """Lab disks with a service time of `ms` per I/O while the block runs, as a disk has one.

    Under emulation the CPU's part of a write through md and iSCSI is tens of times what it is
    on a real host, and a lab disk answers in a fraction of a millisecond: a ratio of latencies
    would measure the emulator. Each disk is a dm device (remirror.lab.guest): its linear table
    is swapped live for dm-delay's and back, under whatever holds it open (md, LIO)."""
    tables = {}
    for disk in disks:
        name = Path(f"/sys/class/block/{Path(disk).resolve().name}/dm/name").read_text().strip()
        table = sh("dmsetup", "table", name).stdout.strip()
        start, length, target, device, offset = table.split()
        assert target == "linear", table
        sh("dmsetup", "reload", name, "--table", f"{start} {length} delay {device} {offset} {ms}")
        sh("dmsetup", "resume", name)
        tables[name] = table
    try:
        yield
    finally:
        for name, table in tables.items():
            sh("dmsetup", "reload", name, "--table", table)
            sh("dmsetup", "resume", name)


def md_digest(offset: int, size: int, device: str = MD) -> str:
    """sha256 of a region of the mirror device, read with O_DIRECT (past the page cache)."""
    buffer = mmap.mmap(-1, size)
    fd = os.open(device, os.O_RDONLY | os.O_DIRECT)
    try:
        assert os.preadv(fd, [buffer], offset) == size
    finally:
        os.close(fd)
    return hashlib.sha256(buffer).hexdigest()


def wait_in_sync(device: str = MD) -> None:
    """Until md reports nothing to do: write-behind drained, no resync."""
    try:
        probes.wait_idle(device, SLOW)
    except TimeoutError as error:
        raise AssertionError(f"{error}\n{Path('/proc/mdstat').read_text()}") from None


def start_fio_verify(device: str = MD) -> subprocess.Popen[str]:
    """fio writing 4 KiB blocks at random into 16 MiB of the mirror, then reading each back (crc32c)."""
    return subprocess.Popen(
        [
            "fio", "--name=verify", f"--filename={device}", "--rw=randwrite", "--bs=4k", "--offset=128M",
            "--size=16M", "--direct=1", "--ioengine=psync", "--verify=crc32c", "--do_verify=1",
            "--verify_fatal=1", "--output-format=json",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip


def wait_writing(device: str = MD, size: int = MiB, timeout: float = SLOW) -> None:
    """Until `size` more bytes have been written to `device` (a workload such as fio is under way)."""
    target = probes.sectors_written(device) + size // 512
    deadline = time.monotonic() + timeout
    while probes.sectors_written(device) < target:
        assert time.monotonic() < deadline, f"nothing written to {device} for {timeout:.0f}s"
        time.sleep(0.2)


def fio_verified(fio: subprocess.Popen[str]) -> None:
    """Wait for `start_fio_verify`'s fio: every write went through and read back as written."""
    report, _ = fio.communicate(timeout=SLOW)
    assert fio.returncode == 0, report
    assert json.loads(report)["jobs"][0]["error"] == 0, report


def remote_member_state() -> str:
    """md's state of the replica's member (an iSCSI disk): in_sync, faulty, ... or missing."""
    kernel = Path(MD).resolve().name
    for member in Path(f"/sys/block/{kernel}/md").glob("dev-sd*/state"):
        try:
            return member.read_text().strip()
        except OSError:  # removed from the array between the glob and the read
            continue
    return "missing"


def wait_sessions_back(timeout: float = 120) -> None:
    """Until every iSCSI session on site A is LOGGED_IN again (after a cut link: iscsid logs in
    once a NOP shows the link back), so that the next test starts from a healthy mirror."""
    deadline = time.monotonic() + timeout
    while True:
        states = [p.read_text().strip() for p in Path("/sys/class/iscsi_session").glob("*/state")]
        if all(state == "LOGGED_IN" for state in states):
            return
        assert time.monotonic() < deadline, f"sessions still {states} {timeout:.0f}s after the link came back"
        time.sleep(0.5)


def wait_faulty(timeout: float = 120) -> None:
    """Until md has failed the replica leg (a cut link under `degrade`)."""
    started = time.monotonic()
    while "faulty" not in remote_member_state():
        assert time.monotonic() - started < timeout, remote_member_state()
        time.sleep(1)


def lio_objects() -> set[str]:
    """Every iSCSI target and block backstore in LIO (configfs is global to the VM)."""
    config = Path("/sys/kernel/config/target")
    targets = {p.name for p in (config / "iscsi").glob("iqn.*")}
    backstores = {p.name for p in (config / "core").glob("iblock_*/*") if p.is_dir() and p.name != "alua"}
    return targets | backstores


def legs_match(size: int | None = None) -> bool:
    """Whether both legs hold the same data; `size`: the array's, when it is not running to say it."""
    return probes.legs_hold_the_same_data("/dev/lab/a0", "/dev/lab/b0", size or probes.array_size(MD))


def examine_uuid(disk: str, site_b: bool) -> str:
    argv = ["mdadm", "--examine", "--export", disk]
    out = (on_b(*argv) if site_b else sh(*argv)).stdout
    match = re.search(r"^MD_UUID=(\S+)$", out, flags=re.M)
    return match.group(1) if match else ""


def site_views(name: str, mirrors: str, initiators: bool = False) -> tuple[str, str]:
    """A profile's two views: site A's (itself local, site B over SSH with the lab's key) and
    site B's own (itself local: what its agent lets others name there, docs/security.md).
    `initiators`: each site's initiator name in both (`sites.NAME.initiator`)."""
    from remirror.lab.spec import IDENTITY_FILE, INITIATOR_NAMES, KNOWN_HOSTS

    a, b = (f", initiator: {INITIATOR_NAMES[s]}" if initiators else "" for s in "ab")
    site_a = f"""\
version: 1
name: {name}
sites:
  site-a: {{host: local{a}}}
  site-b:
    host: ssh://root@site-b
    ssh: {{identity_file: {IDENTITY_FILE}, known_hosts: {KNOWN_HOSTS}}}
mirrors:
{mirrors}"""
    site_b = f"""\
version: 1
name: {name}
sites:
  site-a: {{host: "ssh://root@site-a"{a}}}
  site-b: {{host: local{b}}}
mirrors:
{mirrors}"""
    return site_a, site_b
