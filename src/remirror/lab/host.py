"""Boot a lab VM from the host and run one command in it.

This module starts QEMU (through virtme-ng) and streams its console to the
operator's terminal, so it uses subprocess directly rather than the site
runner, whose commands are captured and bounded: the VM is a development
tool, not an action on a site.
"""

from __future__ import annotations

import compileall
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from remirror.errors import RemirrorError
from remirror.lab import dilation as probes
from remirror.lab.spec import CACHED_ROOT_TAG, LabSpec

LAB_FAILED = 124  # the lab itself did not come up or timed out (as timeout(1) does)
DEFAULT_TIMEOUT = 3600.0
DEFAULT_MEMORY = "2G"
# Debian's kernel on TCG: KVM here is a PVM hypervisor on which it hangs (lab notes).
QEMU = "qemu-system-x86_64"
INSTALL_HINT = (
    "run ./dev setup as root (apt-get install qemu-system-x86 linux-image-amd64; pip install virtme-ng)"
)


class LabError(RemirrorError):
    """The lab could not be started or did not come up."""

    exit_code = LAB_FAILED


@dataclass(frozen=True)
class Prerequisites:
    """What booting a lab needs on the host."""

    qemu: str
    vng: str
    kernel: str


def find_prerequisites() -> Prerequisites:
    """Locate qemu, virtme-ng and a Debian kernel with modules; one line naming what is missing."""
    missing = []
    qemu = shutil.which(QEMU)
    if qemu is None:
        missing.append(f"{QEMU} (Debian package qemu-system-x86)")
    venv_vng = Path(sys.executable).parent / "vng"
    vng = str(venv_vng) if venv_vng.exists() else shutil.which("vng")
    if vng is None:
        missing.append("virtme-ng (vng, from PyPI)")
    kernel = find_kernel()
    if kernel is None:
        missing.append("a Debian kernel with md/dm/LIO modules (package linux-image-amd64)")
    elif not os.access(kernel, os.R_OK):
        missing.append(f"read access to {kernel} (run as root)")
    if missing or qemu is None or vng is None or kernel is None:
        raise LabError(f"lab: missing {', '.join(missing)}: {INSTALL_HINT}")
    return Prerequisites(qemu, vng, kernel)


def find_kernel(boot: Path = Path("/boot"), modules: Path = Path("/lib/modules")) -> str | None:
    """The newest /boot/vmlinuz-VERSION whose modules include md RAID1 and dm-writecache."""
    found = []
    for image in boot.glob("vmlinuz-*"):
        version = image.name.removeprefix("vmlinuz-")
        drivers = modules / version / "kernel" / "drivers" / "md"
        if any(drivers.glob("raid1.ko*")) and any(drivers.glob("dm-writecache.ko*")):
            found.append((image.stat().st_mtime, str(image)))
    return max(found)[1] if found else None


def run_lab(
    spec: LabSpec,
    *,
    out_dir: Path | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    memory: str = DEFAULT_MEMORY,
    cpus: int = 2,
) -> int:
    """Boot a fresh lab, run spec.command on site A, copy $LAB_OUT back; return its exit code."""
    tools = find_prerequisites()
    work = Path(tempfile.mkdtemp(prefix="remirror-lab-", dir=os.environ.get("REMIRROR_LAB_TMPDIR")))
    # QEMU runs in a session of its own: a TERM to this process (a CI tier stopped at its
    # guard, beside another tier that goes on) stops it as Ctrl-C does, not orphaned.
    before = signal.signal(signal.SIGTERM, _interrupted)
    try:
        return _boot(spec, tools, work, out_dir, timeout, memory, cpus)
    finally:
        signal.signal(signal.SIGTERM, before)
        shutil.rmtree(work, ignore_errors=True)


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _boot(
    spec: LabSpec,
    tools: Prerequisites,
    work: Path,
    out_dir: Path | None,
    timeout: float,
    memory: str,
    cpus: int,
) -> int:
    checkout = Path(__file__).resolve().parents[3]
    # The guest sees this checkout read-only: without fresh bytecode it would
    # recompile every module on every start, which under emulation is slow.
    compileall.compile_dir(checkout / "src", quiet=2)
    spec = replace(spec, checkout=str(checkout), python=sys.executable)
    if spec.disk_model and spec.dilation is None:
        # The guest measures itself the same way at boot; longer loops here, where they run fast.
        spec = replace(spec, host_probes=probes.measure(scale=10))
    (work / "out").mkdir()
    (work / "spec.json").write_text(spec.to_json())
    drives: list[str] = []
    for disk in spec.disks:
        image = work / f"{disk.name}.img"
        with image.open("wb") as handle:
            handle.truncate(disk.size)  # sparse: costs host disk only where written
        # cache=unsafe: the images are thrown away, and host fsyncs would only slow the lab.
        drives += [
            f"-drive file={image},if=none,id={disk.serial},format=raw,cache=unsafe",
            f"-device virtio-blk-pci,drive={disk.serial},serial={disk.serial}",
        ]
    # A second view of the host's root filesystem, which the guest mounts with
    # the page and attribute caches on (see guest._use_cached_root).
    drives += [
        f"-fsdev local,id={CACHED_ROOT_TAG},path=/,security_model=none,readonly=on,multidevs=remap",
        f"-device virtio-9p-pci,fsdev={CACHED_ROOT_TAG},mount_tag={CACHED_ROOT_TAG}",
    ]
    argv = [
        tools.vng,
        "--disable-kvm",
        "--run",
        tools.kernel,
        "--memory",
        memory,
        "--cpus",
        str(cpus),
        # No speculative-execution mitigations in a throwaway VM that runs only the lab: under
        # emulation the kernel's retpolines and barriers are paid in emulated instructions (an
        # SSH connection to site B 0.89 -> 0.76 s, a remote agent's answer 3.2 -> 2.8 s, measured
        # in the lab). Nothing else runs in it, and it never reaches another machine.
        "--append",
        "mitigations=off",
        "--overlay-rwdir",
        "/etc",
        "--overlay-rwdir",
        "/var",
        # The same path inside: the host's root filesystem is the guest's,
        # read-only, so only an existing path can be a mount point.
        f"--rwdir={work}",
        f"--qemu-opts={' '.join(drives)}",
        "--exec",
        f"{sys.executable} -m remirror.lab.guest {work}/spec.json",
    ]
    env = {**os.environ, "PATH": f"{Path(tools.vng).parent}:{os.environ.get('PATH', '')}"}
    _say(f"booting a lab ({spec.describe()}); this takes a minute under emulation")
    started = time.monotonic()
    # Non-interactive runs get a pipe: QEMU reopens the console file it is
    # given and writes from offset 0, which would overwrite a log file that
    # the caller's stdout points into (CI logs, `./dev test > log`).
    piped = not spec.interactive
    proc = subprocess.Popen(
        argv,
        env=env,
        cwd=checkout,
        stdin=subprocess.DEVNULL if piped else None,
        stdout=subprocess.PIPE if piped else None,
        stderr=subprocess.STDOUT if piped else None,
        start_new_session=True,  # so a timeout can stop QEMU and all it started
    )
    pump = threading.Thread(target=_copy_console, args=(proc,), daemon=True) if piped else None
    if pump is not None:
        pump.start()
    ready_after: float | None = None
    try:
        # Poll rather than block: the moment the guest reports ready is the
        # lab's boot time, which the operator (and the issue notes) want.
        while proc.poll() is None:
            if time.monotonic() - started > timeout:
                _stop(proc)
                _say(f"the lab timed out after {timeout:g}s")
                _show_setup_log(work)
                return LAB_FAILED
            if ready_after is None and (work / "ready").exists():
                ready_after = time.monotonic() - started
                _say(f"lab is up after {ready_after:.0f}s")
            time.sleep(0.5)
    except KeyboardInterrupt:
        _stop(proc)
        raise
    if pump is not None:
        pump.join(timeout=10)
    status = _read(work / "status")
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        shutil.copytree(work / "out", out_dir, dirs_exist_ok=True)
        if (work / "setup.log").exists():  # how the lab came up, for when it did not
            shutil.copy(work / "setup.log", out_dir / "lab-setup.log")
    if not status.startswith("exit "):
        _say(f"the lab did not come up (vng exited {proc.returncode}, status {status or 'none'})")
        _show_setup_log(work)
        return LAB_FAILED
    _say(f"lab run finished after {time.monotonic() - started:.0f}s: {status}")
    return int(status.split()[1])


def _copy_console(proc: subprocess.Popen[bytes]) -> None:
    """Copy the VM console to our stdout, line by line, without its padding."""
    assert proc.stdout is not None  # noqa: S101 - Popen was given stdout=PIPE
    out = sys.stdout.buffer
    for line in proc.stdout:
        # The serial console pads and carriage-returns; a log wants plain lines.
        out.write(line.rstrip(b" \r\n") + b"\n")
        out.flush()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _show_setup_log(work: Path) -> None:
    log = _read(work / "setup.log")
    if log:
        tail = "\n".join(log.splitlines()[-20:])
        _say(f"last lines of the lab's setup log:\n{tail}")


def _say(message: str) -> None:
    print(f"lab: {message}", file=sys.stderr, flush=True)  # noqa: T201 - progress for the operator
