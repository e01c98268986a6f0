"""Measure how fast this machine runs the paths a mirror's CPU work takes.

The same probes run on the host before a lab boots and in the guest while
it sets up (`--dilation auto`); their ratios give the lab's time dilation
(remirror.lab.model.dilation_factor). Each probe is timed several times and
the fastest kept: a shared machine can only make a run slower, never faster.

- cpu: an interpreter loop (user-space work, branches and memory);
- syscall: one-byte reads of /dev/zero and writes to /dev/null;
- tcp_round_trip: one byte to a local echo server in another process and
  back, over loopback (the TCP stack, two context switches, two wakeups);
- block_write: 4 KiB O_DIRECT writes, one at a time, to a loop device over a
  file in memory (the block layer, a kernel worker's wakeup, a completion).
  It needs root, as the lab does.

Only the standard library: `python -m remirror.lab.dilation echo` is the
echo server, and under emulation every import costs.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import mmap
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

REPEATS = 5


def _best(operation: Callable[[], None], count: int) -> float:
    """Seconds per operation: the fastest of REPEATS runs of `count` operations."""
    best = float("inf")
    for _ in range(REPEATS):
        started = time.perf_counter()
        operation()
        best = min(best, time.perf_counter() - started)
    return best / count


def _cpu(count: int) -> Callable[[], None]:
    def loop() -> None:
        x = 0
        for i in range(count):
            x = (x * 31 + i) & 0xFFFF

    return loop


def _syscalls(count: int) -> Callable[[], None]:
    def loop() -> None:
        zero = os.open("/dev/zero", os.O_RDONLY)
        null = os.open("/dev/null", os.O_WRONLY)
        try:
            for _ in range(count // 2):
                os.write(null, os.read(zero, 1))
        finally:
            os.close(zero)
            os.close(null)

    return loop


@contextlib.contextmanager
def _round_trips(count: int) -> Iterator[Callable[[], None]]:
    """`count` one-byte round trips to an echo server in another process, per call."""
    server = subprocess.Popen(
        [sys.executable, "-m", "remirror.lab.dilation", "echo"], stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None  # noqa: S101 - Popen was given stdout=PIPE
    try:
        with socket.create_connection(("127.0.0.1", int(server.stdout.readline()))) as client:
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def loop() -> None:
                for _ in range(count):
                    client.sendall(b"x")
                    if not client.recv(1):
                        raise OSError("the echo server went away")

            yield loop
    finally:
        server.wait(timeout=30)  # it ends when the client closes


@contextlib.contextmanager
def _block_writes(count: int) -> Iterator[Callable[[], None]]:
    """`count` 4 KiB direct writes, one at a time, to a loop device over a file in memory."""
    # mkstemp creates the file exclusively, under a random name: safe in a shared directory.
    in_memory = [d for d in ("/dev/shm", "/run", "/tmp") if _is_tmpfs(d)]  # noqa: S108
    if not in_memory:
        raise OSError("the block probe needs a tmpfs (/dev/shm, /run or /tmp)")
    handle, image = tempfile.mkstemp(dir=in_memory[0], prefix="remirror-probe-")
    try:
        os.ftruncate(handle, 16 << 20)
        attached = subprocess.run(
            ["losetup", "--find", "--show", image], capture_output=True, text=True, check=False
        )
        if attached.returncode:
            raise OSError(f"the block probe needs a loop device (root): {attached.stderr.strip()}")
        device = attached.stdout.strip()
        try:
            target = os.open(device, os.O_WRONLY | os.O_DIRECT)
            page = mmap.mmap(-1, 4096)  # page-aligned, as O_DIRECT wants

            def loop() -> None:
                for i in range(count):
                    os.pwrite(target, page, (i * 7 % 4096) * 4096)

            try:
                yield loop
            finally:
                os.close(target)
        finally:
            subprocess.run(["losetup", "--detach", device], check=False)
    finally:
        os.close(handle)
        Path(image).unlink()


def _is_tmpfs(directory: str) -> bool:
    return any(f" {directory} tmpfs " in line for line in Path("/proc/mounts").read_text().splitlines())


def measure(scale: int = 1) -> dict[str, float]:
    """Seconds per operation of each probe. `scale` > 1 runs longer loops (a fast host needs them)."""
    with _round_trips(200 * scale) as round_trips, _block_writes(200 * scale) as block_writes:
        return {
            "cpu": _best(_cpu(20_000 * scale), 20_000 * scale),
            "syscall": _best(_syscalls(4_000 * scale), 4_000 * scale),
            "tcp_round_trip": _best(round_trips, 200 * scale),
            "block_write": _best(block_writes, 200 * scale),
        }


def request_overhead(device: str, service_s: float, depth: int, largest: int) -> dict[str, float]:
    """The guest's own time per request on a modelled disk, beyond the `service_s` the disk
    takes, for the requests the bench makes: 4 KiB direct writes one at a time, 32 of them
    with 16 in flight (a queue behind the disk's `depth`), and 8 of the disk's `largest`
    requests with 4 in flight (a stream; the guest copies each into the disk's memory). The
    device's first 64 MiB are written: only a scratch disk."""
    target = os.open(device, os.O_WRONLY | os.O_DIRECT)
    small, large = mmap.mmap(-1, 4096), mmap.mmap(-1, largest)  # page-aligned, as O_DIRECT wants

    def write_small(i: int) -> None:
        os.pwrite(target, small, (i * 97 % 4096) * 4096)

    def write_large(i: int) -> None:
        os.pwrite(target, large, (16 << 20) + i * largest)

    def per_request(write: Callable[[int], None], count: int, in_flight: int) -> float:
        started = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(in_flight) as pool:
            list(pool.map(write, range(count)))
        rounds = count / min(depth, in_flight)
        return (time.perf_counter() - started) / rounds - service_s

    try:
        return {
            "one_at_a_time_s": per_request(write_small, 10, 1),
            "queued_s": per_request(write_small, 32, 16),
            "stream_s": per_request(write_large, 8, 4),
        }
    finally:
        os.close(target)


def _echo() -> int:
    """Echo bytes back to one client until it closes (the far end of tcp_round_trip)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        sys.stdout.write(f"{listener.getsockname()[1]}\n")
        sys.stdout.flush()
        connection, _ = listener.accept()
        with connection:
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while data := connection.recv(64):
                connection.sendall(data)
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["echo"]:
        sys.exit(_echo())
    sys.stdout.write(json.dumps(measure(scale=int(sys.argv[1]) if len(sys.argv) > 1 else 1)) + "\n")
