"""The old primary's leg after a promotion by force (roles.ran_without_primary): it may hold
writes the new primary never got, so it does not rejoin by the bitmap unless it stopped clean."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from remirror.facts.parsers import parse_examine
from remirror.facts.site import SiteFacts
from remirror.health import assess
from remirror.plan.promote import make_promotion
from remirror.roles import _forced_over, profile_as_run, ran_without_primary
from tests.unit.test_failover import PROFILE, applied
from tests.unit.test_plan_properties import SECRETS
from tests.unit.test_start import after_a_power_cut

FIXTURES = Path(__file__).parent / "fixtures" / "lab-6.1"
RUNNING = profile_as_run(PROFILE, {"m0": "b"})


def old_primary_back(clean: bool | None) -> dict[str, SiteFacts]:
    """Site b promoted by force while site a was away (its record not told); then site a boots,
    its leg in an inactive md127, its superblock's State `clean` or `active` (None: unknown)."""
    sites = applied()
    sites.run(make_promotion(PROFILE, "m0", "b", {**sites.facts, "a": None}, SECRETS, force=True))
    a = after_a_power_cut()["a"]
    leg = a.disks["/dev/a0"]
    assert leg.superblock is not None
    marked = dataclasses.replace(leg, superblock=dataclasses.replace(leg.superblock, clean=clean))
    return {**sites.facts, "a": dataclasses.replace(a, disks={**a.disks, "/dev/a0": marked})}


@pytest.mark.parametrize("clean", [False, None])
def test_an_old_primary_that_did_not_stop_clean_is_a_split_brain_after_a_forced_promotion(
    clean: bool | None,
) -> None:
    facts = old_primary_back(clean)
    why = ran_without_primary(RUNNING, RUNNING.mirrors[0], facts)
    assert "it did not stop cleanly" in why, why
    assert "before b was promoted by force without it" in why
    assert assess(RUNNING, RUNNING.mirrors[0], facts).state == "SPLIT_BRAIN"


def test_an_old_primary_that_stopped_clean_rejoins_by_the_bitmap() -> None:
    # md marks the array clean only when no write is pending on any leg, write-behind's too.
    facts = old_primary_back(True)
    assert ran_without_primary(RUNNING, RUNNING.mirrors[0], facts) == ""
    assert assess(RUNNING, RUNNING.mirrors[0], facts).state != "SPLIT_BRAIN"


def test_an_old_primary_told_of_the_forced_promotion_is_not_taken_for_one_forced_over() -> None:
    # Reached by the promotion (its array stopped), its leg carries the forced generation too.
    facts = old_primary_back(None)
    told = facts["b"].disks["/dev/b0"].leg_record
    a = facts["a"]
    leg = dataclasses.replace(a.disks["/dev/a0"], leg_record=told)
    facts = {**facts, "a": dataclasses.replace(a, disks={**a.disks, "/dev/a0": leg})}
    assert ran_without_primary(RUNNING, RUNNING.mirrors[0], facts) == ""


def test_the_superblock_s_state_is_read_as_mdadm_prints_it() -> None:
    # Recorded on Debian 12 (kernel 6.1, mdadm 4.2): see fixtures/lab-6.1/README.md.
    clean = parse_examine((FIXTURES / "mdadm-examine-clean.txt").read_text())
    assert clean is not None
    assert clean.clean is True
    states = {
        path.name: parse_examine(path.read_text()) for path in sorted(FIXTURES.glob("mdadm-examine*.txt"))
    }
    assert {sb.clean for sb in states.values() if sb is not None} == {True, False}


def test_a_leg_without_a_record_or_a_replica_left_behind_counts_as_forced_over() -> None:
    # No record to say it heard of the promotion: not taken on trust.
    facts = old_primary_back(False)
    a = facts["a"]
    bare = dataclasses.replace(a.disks["/dev/a0"], leg_record=None)
    facts = {**facts, "a": dataclasses.replace(a, disks={**a.disks, "/dev/a0": bare})}
    assert "promoted by force without it" in ran_without_primary(RUNNING, RUNNING.mirrors[0], facts)
    # Another replica's leg, away during the promotion (its record names the old primary, not
    # itself), may hold the old primary's writes in flight as well.
    promoted = facts["b"].disks["/dev/b0"].leg_record
    assert promoted is not None
    away = dataclasses.replace(promoted, generations=promoted.generations[:-1])
    assert away.current.site == "a"
    assert _forced_over(promoted, away)
    assert not _forced_over(promoted, promoted)
