"""What a lab is made of: disks, addresses, names. Pure data, shared by host and guest."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from remirror.lab.model import CACHE_DISK_MODEL, DISK_MODELS, netem_args
from remirror.units import format_size, parse_duration

# Inside the VM only. TEST-NET-1 (RFC 5737) is never routed anywhere, so even
# a mistake could not send lab traffic to a real host.
SITE_A_ADDRESS = "192.0.2.1"
SITE_B_ADDRESS = "192.0.2.2"
PREFIX_LENGTH = 24
SITE_B_NETNS = "site-b"
VETH_A = "veth-a"
VETH_B = "veth-b"

LAB_DIR = "/etc/remirror/lab"  # the lab's keys, config and description, inside the VM
LAB_FILE = f"{LAB_DIR}/lab.json"
IDENTITY_FILE = f"{LAB_DIR}/id_ed25519"
KNOWN_HOSTS = f"{LAB_DIR}/known_hosts"
RUN_DIR = "/run/remirror-lab"
# Both labs' sshd (the single-VM lab's site B, every host of the hosts' lab) offers classic
# X25519 only. OpenSSH 9.2's first choice, the post-quantum hybrid sntrup761x25519, costs the
# emulated CPU a second per connection (1.3 s against 0.25 s of the client's CPU in the
# single-VM lab; 3.8 against 3.0 s for an SSH connection between two hosts with the agent's
# start, median of 3), and every command that reaches another site connects once. A real site
# keeps OpenSSH's defaults: remirror's client offers them all, and the server chooses.
SSHD_KEX = "KexAlgorithms curve25519-sha256,curve25519-sha256@libssh.org\n"
SITE_B_ANCHOR_PID = f"{RUN_DIR}/site-b.pid"

INITIATOR_NAMES = {
    "a": "iqn.2026-11.org.remirror.lab:site-a",
    "b": "iqn.2026-11.org.remirror.lab:site-b",
}

DEFAULT_DISKS = 4
# The 9p tag of the host's root filesystem mounted with caches (see guest.py).
CACHED_ROOT_TAG = "remirror-root"
DEFAULT_DISK_SIZE = 256 * 1024**2
FAST_DISK_SIZE = 64 * 1024**2
MAX_DISKS = 16


@dataclass(frozen=True)
class Disk:
    """One lab disk: its name under /dev/lab, its site, size and its performance model, if any."""

    name: str
    site: str
    size: int
    model: str = ""  # a name in remirror.lab.model.DISK_MODELS; "": the plain virtio disk

    @property
    def serial(self) -> str:
        """The virtio serial the host gives it (udev: /dev/disk/by-id/virtio-SERIAL)."""
        return f"lab-{self.name}"

    @property
    def dm_name(self) -> str:
        """The device-mapper name wrapping it."""
        return f"lab-{self.name}"

    @property
    def path(self) -> str:
        """Where profiles and tests find it."""
        return f"/dev/lab/{self.name}"


_WAN_KEYS = ("delay", "jitter", "rate", "loss")
_RATE_RE = re.compile(r"^(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit)$")
_LOSS_RE = re.compile(r"^\d+(\.\d+)?%$")


@dataclass(frozen=True)
class Wan:
    """A netem emulation of a WAN link, applied on both ends of the veth pair (egress)."""

    delay: str | None = None
    jitter: str | None = None
    rate: str | None = None
    loss: str | None = None

    def __post_init__(self) -> None:
        for name in ("delay", "jitter"):
            value = getattr(self, name)
            if value is not None and not re.fullmatch(r"\d+(\.\d+)?(ms|us|s)", value):
                raise ValueError(f"{name} {value!r}: expected a time such as 7ms")
        if self.jitter and not self.delay:
            raise ValueError("jitter needs a delay")
        if self.rate is not None and not _RATE_RE.match(self.rate):
            raise ValueError(f"rate {self.rate!r}: expected e.g. 1mbit, 45mbit, 100mbit")
        if self.loss is not None and not _LOSS_RE.match(self.loss):
            raise ValueError(f"loss {self.loss!r}: expected a percentage such as 0.5%")
        if not any((self.delay, self.rate, self.loss)):
            raise ValueError("a WAN needs at least one of delay, rate, loss")

    @classmethod
    def parse(cls, text: str) -> Wan:
        """`7ms` (a delay) or `delay=7ms,jitter=1ms,rate=45mbit,loss=0.5%`."""
        if "=" not in text:
            return cls(delay=text.strip())
        values: dict[str, str] = {}
        for part in text.split(","):
            key, _, value = part.partition("=")
            key = key.strip()
            if key not in _WAN_KEYS:
                raise ValueError(f"{key!r} is not a WAN setting (use {', '.join(_WAN_KEYS)})")
            values[key] = value.strip()
        return cls(**values)

    def netem_args(self) -> list[str]:
        """The `tc qdisc ... netem` arguments for one direction."""
        args: list[str] = []
        if self.delay:
            args += ["delay", self.delay] + ([self.jitter] if self.jitter else [])
        if self.rate:
            args += ["rate", self.rate]
        if self.loss:
            args += ["loss", self.loss]
        return args

    @property
    def one_way_delay_seconds(self) -> float:
        """The added delay in one direction (RTT grows by twice this)."""
        return _seconds(self.delay) if self.delay else 0.0

    def dilated_netem_args(self, dilation: float, default_rate_bit_s: float | None) -> list[str]:
        """The netem arguments for this physical link in a lab `dilation` times slower than the
        hardware it models: delays times the factor, rates divided by it. A link given no rate
        keeps `default_rate_bit_s` (the modelled LAN's)."""
        rate = _bits_per_second(self.rate) if self.rate else default_rate_bit_s
        return netem_args(
            self.one_way_delay_seconds * dilation,
            _seconds(self.jitter) * dilation if self.jitter else None,
            rate / dilation if rate else None,
            self.loss,
        )


_RATE_UNITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}


def _bits_per_second(rate: str) -> float:
    match = _RATE_RE.match(rate)
    if not match:
        raise ValueError(f"rate {rate!r}: expected e.g. 1mbit, 45mbit, 100mbit")
    return float(match.group(1)) * _RATE_UNITS[match.group(2)]


def _seconds(text: str) -> float:
    return float(text[:-2]) / 1e6 if text.endswith("us") else parse_duration(text)


@dataclass(frozen=True)
class LabSpec:
    """Everything the guest needs to build the lab; written as JSON by the host."""

    disks_per_site: int = DEFAULT_DISKS
    disk_size: int = DEFAULT_DISK_SIZE
    fast_disk_size: int = FAST_DISK_SIZE  # each site's cache disk
    disk_model: str = ""  # the data disks' model; the cache disks get its CACHE_DISK_MODEL
    dilation: float | None = None  # with a model: None measures it at boot (`auto`)
    host_probes: dict[str, float] | None = None  # the host's speed, for `auto` (remirror.lab.dilation)
    wan: Wan | None = None
    checkout: str = ""
    python: str = ""
    command: tuple[str, ...] = ()
    interactive: bool = False
    disks: tuple[Disk, ...] = field(default=())

    def __post_init__(self) -> None:
        if not 1 <= self.disks_per_site <= MAX_DISKS:
            raise ValueError(f"--disks must be 1 to {MAX_DISKS}")
        if self.disk_model and self.disk_model not in CACHE_DISK_MODEL:
            raise ValueError(f"--disk-model {self.disk_model!r}: expected {', '.join(CACHE_DISK_MODEL)}")
        for option, size in (("--disk-size", self.disk_size), ("--fast-disk-size", self.fast_disk_size)):
            if size < 16 * 1024**2 or size % 4096:
                raise ValueError(f"{option} must be at least 16MiB and a multiple of 4KiB")
            if self.disk_model and size % 1024**2:
                raise ValueError(f"{option} must be a multiple of 1MiB with a --disk-model")
        if self.dilation is not None and not self.disk_model:
            raise ValueError("--dilation needs a --disk-model")
        if not self.disks:
            object.__setattr__(self, "disks", self._make_disks())

    def _make_disks(self) -> tuple[Disk, ...]:
        cache_model = CACHE_DISK_MODEL.get(self.disk_model, "")
        disks = [
            Disk(f"{site}{i}", site, self.disk_size, self.disk_model)
            for site in ("a", "b")
            for i in range(self.disks_per_site)
        ]
        disks += [Disk(f"{site}-fast0", site, self.fast_disk_size, cache_model) for site in ("a", "b")]
        return tuple(disks)

    def describe(self) -> str:
        """One line for the operator: what this lab has."""
        model = ""
        if self.disk_model:
            dilated = "measured at boot" if self.dilation is None else f"{self.dilation:g}"
            model = f" modelled as {DISK_MODELS[self.disk_model].what}, time dilated {dilated}"
        wan = f", WAN {' '.join(self.wan.netem_args())}" if self.wan else ""
        return (
            f"{self.disks_per_site} disks of {format_size(self.disk_size)} per site{model},"
            f" fast disks of {format_size(self.fast_disk_size)}{wan}"
        )

    def to_json(self) -> str:
        """Serialise for the guest."""
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> LabSpec:
        """Read what `to_json` wrote."""
        data: dict[str, Any] = json.loads(text)
        data["wan"] = Wan(**data["wan"]) if data.get("wan") else None
        data["disks"] = tuple(Disk(**d) for d in data.get("disks", ()))
        data["command"] = tuple(data.get("command", ()))
        return cls(**data)
