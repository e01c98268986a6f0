"""Human units for sizes and durations, as profiles and flags write them.

Sizes follow the storage tools an administrator already uses: `K`, `M`, `G`,
`T` and the IEC forms `KiB` ... `TiB` are powers of 1024 (as in mdadm, LVM
and dd); `kB`, `MB`, `GB`, `TB` are powers of 1000 (as disk vendors write
them). A bare number is bytes.

Durations are one or more `<number><unit>` parts with units `ms`, `s`, `m`,
`h`, `d`, `w` (`90s`, `1h30m`, `7d`). A bare number is seconds.

Rates are written either as links are sold, in bits per second with decimal
prefixes (`50Mbit`, `1Gbit/s`, `50Mbps`), or as a size per second (`6MB/s`,
`40MiB`, a bare number being bytes per second). One parser reads every rate,
in profiles and on command lines alike: `parse_rate`.
"""

from __future__ import annotations

import re

_BINARY_FACTORS = {  # matched case-insensitively
    "": 1,
    "b": 1,
    "k": 1024,
    "kib": 1024,
    "m": 1024**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gib": 1024**3,
    "t": 1024**4,
    "tib": 1024**4,
}
_DECIMAL_FACTORS = {  # matched exactly: "mb" could mean megabits
    "kB": 1000,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "TB": 1000**4,
}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")

_DURATION_FACTORS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION_PART_RE = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")


def parse_size(text: str | int) -> int:
    """Bytes for `64MiB`, `4K`, `1.5GiB`, `500MB` or a plain integer."""
    if isinstance(text, bool):
        raise ValueError("expected a size such as 64MiB, not a boolean")
    if isinstance(text, int):
        if text < 0:
            raise ValueError("a size cannot be negative")
        return text
    match = _SIZE_RE.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a size (examples: 4096, 64KiB, 64MiB, 2G)")
    number, unit = match.groups()
    if unit in _DECIMAL_FACTORS:
        factor = _DECIMAL_FACTORS[unit]
    elif unit.lower() in _BINARY_FACTORS:
        factor = _BINARY_FACTORS[unit.lower()]
    else:
        raise ValueError(f"{text!r}: unknown size unit {unit!r} (use K, M, G, KiB, MiB, GiB, MB, GB)")
    value = float(number) * factor
    if value != int(value):
        raise ValueError(f"{text!r} is not a whole number of bytes")
    return int(value)


def parse_duration(text: str | int | float) -> float:
    """Seconds for `60s`, `500ms`, `1h30m`, `7d` or a plain number of seconds."""
    if isinstance(text, bool):
        raise ValueError("expected a duration such as 60s, not a boolean")
    if isinstance(text, int | float):
        if text < 0:
            raise ValueError("a duration cannot be negative")
        return float(text)
    compact = text.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", compact):
        return float(compact)
    parts = _DURATION_PART_RE.findall(compact)
    if not parts or "".join(n + u for n, u in parts) != compact:
        raise ValueError(f"{text!r} is not a duration (examples: 500ms, 60s, 5m, 1h30m, 7d)")
    return sum(float(n) * _DURATION_FACTORS[u] for n, u in parts)


# Bits are told from bytes by the word: `bit` or `bps`, never a bare `b` (`Mb` is refused: a
# megabit to a network engineer, a megabyte to others). The prefix's case does not matter
# (`10mbit` is tc's spelling): no one means a millibit.
_BIT_RATE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)(?:bit(?:/s)?|bps)\s*$")
_BIT_PREFIXES = {"": 1, "k": 1000, "m": 1000**2, "g": 1000**3}


def parse_rate(text: str | int | float) -> float:
    """Bytes per second for `50Mbit`, `1Gbit/s`, `50Mbps`, `6MB/s`, `40MiB` or a number of bytes."""
    if isinstance(text, bool):
        raise ValueError("expected a rate such as 50Mbit, not a boolean")
    if isinstance(text, int | float):
        rate = float(text)
    elif match := _BIT_RATE_RE.match(text):
        rate = float(match.group(1)) * _BIT_PREFIXES[match.group(2).lower()] / 8
    else:
        try:
            rate = float(parse_size(text.strip().removesuffix("/s")))
        except ValueError:
            raise ValueError(f"{text!r} is not a rate (examples: 50Mbit, 1Gbit/s, 6MB/s, 40MiB)") from None
    if rate <= 0:
        raise ValueError(f"{text!r}: a rate must be more than 0")
    return rate


def format_bits(rate: float) -> str:
    """Bytes per second as a link's rate (`50Mbit/s`, `1.2Gbit/s`), three figures at most."""
    bits = rate * 8
    for prefix, factor in (("G", 1000**3), ("M", 1000**2), ("k", 1000)):
        if bits >= factor:
            return f"{_figures(bits / factor)}{prefix}bit/s"
    return f"{_figures(bits)}bit/s"


def format_approx(value: float) -> str:
    """A byte count to three figures in IEC units (`1.82TiB`, `512MiB`): for estimates."""
    for unit, factor in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if value >= factor:
            return f"{_figures(value / factor)}{unit}"
    return f"{round(value)}B"


def _figures(value: float) -> str:
    return f"{value:.3g}" if value < 1000 else f"{value:.0f}"


def format_size(value: int) -> str:
    """The shortest exact IEC form of a byte count (`64MiB`, `1536KiB`)."""
    for unit, factor in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if value >= factor and value % factor == 0:
            return f"{value // factor}{unit}"
    return f"{value}B"


def format_duration(seconds: float) -> str:
    """A compact human form of a duration (`7d`, `1h30m`, `500ms`)."""
    if seconds < 1 and seconds != 0:
        return f"{round(seconds * 1000)}ms"
    remaining = round(seconds)
    out = []
    for unit, factor in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, remaining = divmod(remaining, factor)
        if count:
            out.append(f"{count}{unit}")
    return "".join(out) or "0s"
