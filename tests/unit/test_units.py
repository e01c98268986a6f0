"""Sizes and durations as operators write them."""

from __future__ import annotations

import pytest

from remirror.units import format_duration, format_size, parse_duration, parse_size


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4096", 4096),
        (4096, 4096),
        ("64MiB", 64 * 1024**2),
        ("64M", 64 * 1024**2),
        ("64m", 64 * 1024**2),
        ("4K", 4096),
        ("4KiB", 4096),
        ("1.5GiB", 1536 * 1024**2),
        ("2T", 2 * 1024**4),
        ("500MB", 500_000_000),
        ("1kB", 1000),
        (" 8 MiB ", 8 * 1024**2),
        ("512b", 512),
    ],
)
def test_sizes_parse(text: str | int, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("64mb", "unknown size unit 'mb'"),
        ("64 parsecs", "unknown size unit"),
        ("lots", "is not a size"),
        ("-1", "is not a size"),
        ("1.3K", "not a whole number of bytes"),
        (-5, "cannot be negative"),
        (True, "not a boolean"),
    ],
)
def test_bad_sizes_are_refused_with_a_reason(text: str | int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_size(text)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("60s", 60),
        ("60", 60),
        (60, 60),
        ("500ms", 0.5),
        ("5m", 300),
        ("1h30m", 5400),
        ("7d", 7 * 86400),
        ("2w", 14 * 86400),
        ("1.5h", 5400),
    ],
)
def test_durations_parse(text: str | int, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["7 days", "1h 30m", "s", "10x", "", "m5"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration(text)


def test_formats_round_trip() -> None:
    assert format_size(64 * 1024**2) == "64MiB"
    assert format_size(1536 * 1024) == "1536KiB"
    assert format_size(1000) == "1000B"
    assert format_duration(5400) == "1h30m"
    assert format_duration(7 * 86400) == "7d"
    assert format_duration(0.25) == "250ms"
    assert format_duration(0) == "0s"
    for text in ("64MiB", "3GiB", "1KiB"):
        assert format_size(parse_size(text)) == text
