"""verify's pure half: ranges, chunks, which chunks differ, and re-checks that tell writes in flight apart."""

from __future__ import annotations

import pytest

from remirror.health.verify import Span, differing, merged, settle

MiB = 1024 * 1024


def test_a_range_parses_in_sizes_and_must_be_aligned_and_inside() -> None:
    assert Span.parse("100MiB:1MiB") == Span(100 * MiB, MiB)
    assert Span(0, 8 * MiB).checked(8 * MiB, MiB) == Span(0, 8 * MiB)
    with pytest.raises(ValueError, match="boundaries"):
        Span(512, 4096).checked(8 * MiB, 4096)
    with pytest.raises(ValueError, match="past the mirror's"):
        Span(4 * MiB, 8 * MiB).checked(8 * MiB, MiB)
    with pytest.raises(ValueError, match="multiple of 4096"):
        Span(0, MiB).checked(8 * MiB, 1000)
    with pytest.raises(ValueError, match="OFFSET:LENGTH"):
        Span.parse("100MiB")


def test_chunks_cover_the_span_exactly() -> None:
    chunks = Span(MiB, MiB + 8192).chunks(MiB)
    assert chunks == [Span(MiB, MiB), Span(2 * MiB, 8192)]


def test_differing_chunks_and_merged_ranges() -> None:
    digests = {"a": ["x", "y", "z", "w"], "b": ["x", "Y", "Z", "w"]}
    assert differing(digests) == [1, 2]
    assert merged([Span(2 * MiB, MiB), Span(MiB, MiB), Span(5 * MiB, MiB)]) == [
        Span(MiB, 2 * MiB),
        Span(5 * MiB, MiB),
    ]


def test_a_write_in_flight_settles_and_is_not_a_mismatch() -> None:
    rounds = [{"a": {3: "new"}, "b": {3: "old"}}, {"a": {3: "new"}, "b": {3: "new"}}]
    found = settle("a", rounds)
    assert (found.mismatched, found.busy) == ((), ())


def test_a_difference_that_stays_while_the_primary_is_unchanged_is_a_mismatch() -> None:
    rounds = [
        {"a": {3: "p", 7: "q"}, "b": {3: "bad", 7: "r"}},
        {"a": {3: "p", 7: "q"}, "b": {3: "bad", 7: "q"}},
    ]
    rounds.append({"a": {3: "p"}, "b": {3: "bad"}})  # later rounds only look at what is still suspect
    assert settle("a", rounds).mismatched == (3,)


def test_a_chunk_the_primary_keeps_changing_is_busy_not_mismatched() -> None:
    rounds = [{"a": {1: "v1"}, "b": {1: "v0"}}, {"a": {1: "v2"}, "b": {1: "v1"}}]
    found = settle("a", rounds)
    assert (found.mismatched, found.busy) == ((), (1,))
