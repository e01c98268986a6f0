"""Constrained scalar types used by the profile model.

Each type validates one field on its own and raises `ValueError` with a
message written for the operator; the loader turns it into `file:line:col`.
Rules that relate two fields live in `rules.py`.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, WithJsonSchema

from remirror.profile.schedule import UNLIMITED
from remirror.units import parse_duration, parse_rate, parse_size

# One name pattern serves md array names, LIO object names, derived IQNs and
# hostnames alike: lower-case letters, digits and inner dashes, at most 32
# characters (the md superblock's name field is 32 bytes).
_NAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$")

# RFC 3720 iSCSI qualified names, in the lower-case form LIO and open-iscsi
# compare against; "eui." names are accepted too. 223 bytes at most.
_IQN_RE = re.compile(r"^iqn\.\d{4}-(0[1-9]|1[0-2])\.[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?(?::[a-z0-9.:_-]+)?$")
_EUI_RE = re.compile(r"^eui\.[0-9A-F]{16}$")
_HOSTNAME_RE = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)
_SSH_RE = re.compile(
    r"^ssh://(?:(?P<user>[A-Za-z_][A-Za-z0-9_.-]*)@)?(?P<host>\[[^\]]+\]|[^:/@]+)(?::(?P<port>\d+))?/?$"
)

ISCSI_PORT = 3260
SSH_PORT = 22


def check_name(value: str) -> str:
    if not _NAME_RE.match(value):
        raise ValueError(
            f"{value!r} is not a valid name: use 1-32 lower-case letters, digits and"
            " inner dashes (it becomes part of md array, LIO and iSCSI names)"
        )
    return value


def _check_iqn(value: str) -> str:
    if len(value.encode()) > 223:
        raise ValueError("an iSCSI name is at most 223 bytes")
    if not (_IQN_RE.match(value) or _EUI_RE.match(value)):
        raise ValueError(
            f"{value!r} is not an iSCSI qualified name"
            " (expected iqn.YYYY-MM.reversed.domain[:identifier], lower case)"
        )
    return value


def check_device_path(value: str) -> str:
    if not value.startswith("/dev/") or value.endswith("/") or "/../" in value:
        raise ValueError(
            f"{value!r} is not a device path under /dev/"
            " (prefer /dev/disk/by-id/...: sdX names change between boots)"
        )
    return value


def _check_absolute_path(value: str) -> str:
    if not value.startswith("/"):
        raise ValueError(f"{value!r} is not an absolute path")
    return value


def _host_and_port(text: str, default_port: int, what: str) -> tuple[str, int]:
    """Split `host:port`, `[v6]:port` or a bare host; checks both parts."""
    host, port_text = text, ""
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ValueError(f"{text!r}: unclosed '[' in {what}")
        host, rest = text[1:end], text[end + 1 :]
        if rest and not rest.startswith(":"):
            raise ValueError(f"{text!r} is not a {what} ([IPv6]:port expected)")
        port_text = rest[1:]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"{text!r}: {host!r} is not an IPv6 address") from None
    else:
        if text.count(":") > 1:
            raise ValueError(f"{text!r}: write an IPv6 {what} as [ADDRESS]:PORT")
        host, _, port_text = text.partition(":")
        if not _is_ipv4(host) and not _HOSTNAME_RE.match(host):
            raise ValueError(f"{text!r}: {host!r} is not an IP address or host name")
    if port_text == "":
        return host, default_port
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"{text!r}: port must be a number from 1 to 65535")
    return host, int(port_text)


def _is_ipv4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Portal:
    """An iSCSI portal: where a target listens."""

    address: str
    port: int = ISCSI_PORT

    @classmethod
    def parse(cls, text: str) -> Portal:
        """Parse `ADDR[:PORT]` or `[V6ADDR][:PORT]`; the port defaults to 3260."""
        return cls(*_host_and_port(text.strip(), ISCSI_PORT, "portal"))

    def __str__(self) -> str:
        address = f"[{self.address}]" if ":" in self.address else self.address
        return f"{address}:{self.port}"


@dataclass(frozen=True)
class SshAddress:
    """Where a remote site's SSH server is."""

    user: str
    host: str
    port: int = SSH_PORT

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"ssh://{self.user}@{host}:{self.port}"


def parse_ssh_address(text: str) -> SshAddress:
    """Parse `ssh://[user@]host[:port]`; the user defaults to root."""
    match = _SSH_RE.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a site host (expected 'local' or ssh://[user@]host[:port])")
    hostport = match["host"] + (f":{match['port']}" if match["port"] else "")
    host, port = _host_and_port(hostport, SSH_PORT, "host")
    return SshAddress(user=match["user"] or "root", host=host, port=port)


def _check_host(value: str) -> str:
    if value != "local":
        parse_ssh_address(value)
    return value


def _check_jump(value: str) -> str:
    parse_ssh_address(value)
    return value


def _check_portal(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("a portal is written ADDRESS:PORT, e.g. 192.0.2.10:3260")
    return str(Portal.parse(value))


def _check_power_of_two_size(value: int) -> int:
    if value < 4096 or value & (value - 1):
        raise ValueError("must be a power of two of at least 4KiB (md bitmap chunk)")
    return value


# The lowest resync limit: md counts its limits in KiB/s, and a slower resync of a disk of any
# size would never end. (md holds a resync to sync_speed_max only above sync_speed_min: remirror
# lowers the array's floor with it, plan/resync_limit.py.)
RESYNC_MIN = 64 * 1024


def _check_resync_rate(value: int) -> int:
    if value < RESYNC_MIN:
        raise ValueError("must be at least 64KiB (per second)")
    return value - value % 1024  # md counts its limits in whole KiB/s: what it will hold to


def _rate(value: Any) -> int:
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise ValueError("expected a rate such as 50Mbit or 6MB/s")
    return int(parse_rate(value))


def _rate_or_unlimited(value: Any) -> int | None:
    if value == UNLIMITED:
        return None
    return _check_resync_rate(_rate(value))


def _positive_duration(value: float) -> float:
    if value <= 0:
        raise ValueError("must be longer than zero")
    return value


def _size(value: Any) -> int:
    if not isinstance(value, str | int):
        raise ValueError("expected a size such as 64MiB")
    return parse_size(value)


def _duration(value: Any) -> float:
    if not isinstance(value, str | int | float):
        raise ValueError("expected a duration such as 60s")
    return parse_duration(value)


_SIZE_SCHEMA = WithJsonSchema(
    {
        "anyOf": [
            {"type": "integer", "minimum": 0},
            {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*([KMGT]i?[Bb]?|[kKMGT]B|[bB])?\s*$"},
        ],
        "description": "bytes, or a number with K/M/G/T (1024-based, also KiB...) or kB/MB/GB/TB",
    }
)
_RATE_SCHEMA = WithJsonSchema(
    {
        "anyOf": [
            {"type": "integer", "minimum": 0},
            {
                "type": "string",
                "pattern": r"^\s*\d+(\.\d+)?\s*"
                r"([kKmMgG]?(bit(/s)?|bps)|([KMGT]i?[Bb]?|[kKMGT]B|[bB])?(/s)?)\s*$",
            },
        ],
        "description": "per second: bits as links are sold (50Mbit, 1Gbit/s, 50Mbps), or bytes"
        " (6MB/s, 40MiB, a bare number)",
    }
)
_DURATION_SCHEMA = WithJsonSchema(
    {
        "anyOf": [
            {"type": "number", "minimum": 0},
            {"type": "string", "pattern": r"^(\d+(\.\d+)?(ms|s|m|h|d|w))+$|^\d+(\.\d+)?$"},
        ],
        "description": "seconds, or parts such as 500ms, 60s, 5m, 1h30m, 7d, 2w",
    }
)

Name = Annotated[str, AfterValidator(check_name)]
Iqn = Annotated[str, AfterValidator(_check_iqn)]
DevicePath = Annotated[str, AfterValidator(check_device_path)]
AbsolutePath = Annotated[str, AfterValidator(_check_absolute_path)]
SiteHost = Annotated[str, AfterValidator(_check_host)]
JumpHost = Annotated[str, AfterValidator(_check_jump)]
PortalText = Annotated[str, BeforeValidator(_check_portal), WithJsonSchema({"type": "string"})]
Size = Annotated[int, BeforeValidator(_size), _SIZE_SCHEMA]
BitmapChunk = Annotated[int, BeforeValidator(_size), AfterValidator(_check_power_of_two_size), _SIZE_SCHEMA]
ResyncRate = Annotated[int, BeforeValidator(_rate), AfterValidator(_check_resync_rate), _RATE_SCHEMA]
# A window's limit in `replication.schedule`: a rate, or None for `unlimited` (md's system limit).
ScheduledRate = Annotated[
    int | None,
    BeforeValidator(_rate_or_unlimited),
    WithJsonSchema({"anyOf": [_RATE_SCHEMA.json_schema, {"const": UNLIMITED}]}),
]
Duration = Annotated[float, BeforeValidator(_duration), _DURATION_SCHEMA]
PositiveDuration = Annotated[
    float, BeforeValidator(_duration), AfterValidator(_positive_duration), _DURATION_SCHEMA
]
