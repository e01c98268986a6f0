"""Seeds (docs/seeding.md): the stream, the records, the site's refusals, and the plan over one.

The stream tests run the agent's export and import against files (the disks'
stand-ins; O_DIRECT on the test's file system), with the disk's facts given:
the lab test (tests/lab/test_seeding.py) runs them on block devices.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from remirror.agent import seed as agent_seed
from remirror.agent import seed_records
from remirror.agent.policy import Checker, Refused
from remirror.catch_up import catch_up
from remirror.errors import RemirrorError
from remirror.facts.generations import first_record
from remirror.facts.model import Signature
from remirror.facts.seed import (
    CHUNK,
    MAGIC,
    SeedError,
    SeedHeader,
    SeedRecord,
    export_header,
    header_from_json,
    import_refusal,
    records_from_json,
)
from remirror.facts.site import DiskFacts, SiteFacts
from remirror.plan import PlanError, make_plan
from remirror.plan.seed import CatchUpSeed, measured
from remirror.profile import load_profile
from remirror.profile.names import replica_path
from remirror.profile.scope import site_scope
from remirror.protocol.steps import ByteRange, CopySpans
from tests.unit.test_keep_data import EXT4, keep_data_profile, kept_facts
from tests.unit.test_planner import SECRETS

MiB = 1024 * 1024
SIZE = 8 * MiB  # the stand-in disks
SEED_ID = "0123456789abcdef0123456789abcdef"


def header(**changes: Any) -> SeedHeader:
    base = SeedHeader("lab", "lab0", SEED_ID, "site-a", 7 * MiB, CHUNK, 1.8e9, "ext4", EXT4.uuid or "")
    return dataclasses.replace(base, **changes)


def stand_in(path: Path, *signatures: Signature, fill: bytes = b"") -> DiskFacts:
    path.write_bytes(fill.ljust(SIZE, b"\0"))
    return DiskFacts(str(path), True, path.name, SIZE, signatures, first_sector="zero")


# --- the header and the records: what another host wrote, checked ---------------------------


def test_a_header_reads_back_as_written_and_anything_else_is_refused_saying_what() -> None:
    written = header()
    body = written.encode()[len(MAGIC) + 4 :]
    assert header_from_json(body) == written
    fields = json.loads(body)
    changes: list[tuple[dict[str, Any], str]] = [
        ({"extra": 1}, "other fields than a seed's: extra"),
        ({"seed": "../../etc"}, "seed id"),
        ({"mirror": "lab0;rm"}, "mirror"),
        ({"chunk": 4096}, "is not a seed's"),
        ({"size": 4097}, "not a whole number of 4 KiB blocks"),
        ({"size": True}, "not a whole number"),
        ({"fs_type": "btrfs"}, "btrfs"),
        ({"created": "now"}, "is not a time"),
    ]
    for change, says in changes:
        with pytest.raises(SeedError, match=says):
            header_from_json(json.dumps({**fields, **change}).encode())
    with pytest.raises(SeedError, match="not JSON"):
        header_from_json(b"\xff{")


def test_records_that_do_not_check_are_no_records() -> None:
    good = SeedRecord("import", header(), "/dev/lab/b0", SIZE, 1.8e9).as_json()
    kept = records_from_json([good, {**good, "role": "stolen"}, {**good, "disk": "relative"}, "x", None])
    assert kept == (SeedRecord("import", header(), "/dev/lab/b0", SIZE, 1.8e9),)
    for odd in [
        {**good, "done": 1e20},
        {**good, "disk_size": -1},
        {**good, "seed": {**good["seed"], "created": 1e300}},
    ]:
        assert records_from_json([odd]) == ()  # a time no clock shows would break what names it
    assert records_from_json({"not": "a list"}) == ()


# --- what a site decides before it reads or writes a disk ----------------------------------


def test_a_seed_is_made_only_of_a_file_system_keep_data_keeps() -> None:
    disk = DiskFacts("/dev/lab/a0", True, "dm-0", SIZE, (EXT4,))
    made = export_header("lab", "lab0", "site-a", disk, SEED_ID, 1.8e9)
    assert (made.size, made.fs_type, made.fs_uuid) == (SIZE - MiB, "ext4", EXT4.uuid)  # not its last MiB
    for signatures in [(), (Signature("btrfs", 0x10040, "u"),), (Signature("gpt", 0x200),)]:
        with pytest.raises(SeedError, match="does not start with an ext2/3/4 or XFS"):
            export_header(
                "lab", "lab0", "site-a", dataclasses.replace(disk, signatures=signatures), SEED_ID, 0
            )


def test_an_import_writes_over_nothing_but_a_blank_disk_unless_told_and_never_over_points() -> None:
    blank = DiskFacts("/dev/lab/b0", True, "dm-4", SIZE, first_sector="zero")
    seed = header()
    assert import_refusal(seed, "lab", "lab0", blank, False) is None  # a seed taken before too
    other = Signature("ext4", 0x438, "ffffffff-27ae-439b-8c3f-662cb952909d", "payroll")
    for disk, says in [
        (dataclasses.replace(blank, signatures=(other,)), "holds ext4 filesystem labelled 'payroll'"),
        (dataclasses.replace(blank, signatures=(EXT4,)), "holds ext4 filesystem labelled 'kept'"),
        (dataclasses.replace(blank, first_sector="other"), "holds data at its start (no signature"),
        (
            dataclasses.replace(blank, leg_record=first_record("lab1", "u", "site-a", 1.8e9)),
            "holds the leg record of mirror lab1",
        ),
        (
            dataclasses.replace(blank, leg_record=first_record("lab0", "u", "site-a", 1.8e9)),
            "holds mirror lab0's own leg: after a promotion it may hold the mirror's newest data",
        ),
    ]:
        assert says in (import_refusal(seed, "lab", "lab0", disk, False) or ""), disk
        assert import_refusal(seed, "lab", "lab0", disk, True) is None  # the operator's word
    # Whatever the operator allows: not another mirror's seed, not a disk in use or too small,
    # never a leg's own points or a cache's blocks.
    for disk, mirror, says in [
        (blank, "lab1", "of mirror lab0 of profile lab, not of lab1"),
        (dataclasses.replace(blank, mounts=("/srv",)), "lab0", "is in use (mounted on /srv)"),
        (dataclasses.replace(blank, size=4 * MiB), "lab0", "carries 7340032 bytes"),
        (dataclasses.replace(blank, first_sector="cdp"), "lab0", "holds a leg's own recovery points"),
        (dataclasses.replace(blank, first_sector="writecache"), "lab0", "holds a writecache's blocks"),
    ]:
        assert says in (import_refusal(seed, "lab", mirror, disk, True) or ""), disk


# --- the stream, through the agent -----------------------------------------------------------


@pytest.fixture
def seed_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    records = tmp_path / "seeds"
    monkeypatch.setattr(seed_records, "SEED_DIR", str(records))
    return records


def with_facts(monkeypatch: pytest.MonkeyPatch, facts: dict[str, DiskFacts]) -> None:
    monkeypatch.setattr(agent_seed, "disk_facts", lambda path, info: facts[path])
    monkeypatch.setattr("remirror.agent.observe.observe_disk", lambda path: {})


def exported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, bytes, dict[str, Any]]:
    """A seed of a stand-in disk with data in two of its eight chunks: the file and the data."""
    data = os.urandom(CHUNK) + bytes(3 * CHUNK) + os.urandom(CHUNK // 2)
    a0 = stand_in(tmp_path / "a0", EXT4, fill=data)
    with_facts(monkeypatch, {str(a0.path): a0})
    to = tmp_path / "seed"
    done = agent_seed.answer(
        {"do": "export", "profile": "lab", "mirror": "lab0", "site": "site-a", "disk": a0.path, "to": str(to)}
    )
    assert done["ok"], done
    return to, data.ljust(SIZE - MiB, b"\0"), done


def importing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: Path, **extra: Any) -> dict[str, Any]:
    b0 = Path(tmp_path / "b0")
    facts = (
        stand_in(b0, fill=b"")
        if not b0.exists()
        else DiskFacts(str(b0), True, "b0", SIZE, first_sector="zero")
    )
    with_facts(monkeypatch, {str(b0): facts})
    request = {"do": "import", "profile": "lab", "mirror": "lab0", "disk": str(b0), "from": str(source)}
    return agent_seed.answer({**request, **extra})


def test_a_seed_carries_the_disk_in_little_more_than_its_data_and_an_import_writes_it_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed_dir: Path
) -> None:
    to, data, done = exported(tmp_path, monkeypatch)
    assert (done["chunks"], done["zero_chunks"]) == (7, 5)
    assert to.stat().st_mode & 0o777 == 0o600  # the disk's data: root's alone
    assert to.stat().st_size < 2 * CHUNK + 4096  # two chunks of data, five zero chunks in a byte each
    b0 = tmp_path / "b0"
    stand_in(b0)
    b0.write_bytes(b"\xff" * SIZE)  # what the disk held before: every byte of it goes
    imported = importing(tmp_path, monkeypatch, to)
    assert imported["ok"], imported
    # All but the first chunk (left for the catch-up: no file system shows), and the last MiB
    # zeroed: no record of a leg it was before.
    assert b0.read_bytes() == bytes(MiB) + data[MiB:] + bytes(MiB)
    records = records_from_json(seed_records.read_records())
    assert sorted(r.role for r in records) == ["export", "import"]
    assert {r.header.seed for r in records} == {done["seed"]}
    assert (seed_dir / "lab.lab0.import.json").stat().st_mode & 0o777 == 0o644


def flipped(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 1]) + data[at + 1 :]


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (lambda b: b[:-5], "ends early"),
        (lambda b: b[: len(b) // 2], "ends early"),
        (lambda b: flipped(b, len(b) // 4), "chunk 0 (byte 0) does not match its digest"),
        # A header changed, and still a header: the end's digest covers it.
        (lambda b: b.replace(b'"site-a"', b'"site-b"', 1), "the seed's end does not match its chunks"),
        (lambda b: b + b"more", "goes on past its end"),
        (lambda b: b"REMIRROR-SEED 2\n" + b[16:], "not a remirror seed"),
    ],
)
def test_a_damaged_or_cut_seed_leaves_no_record_and_says_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed_dir: Path, damage: Any, says: str
) -> None:
    to, _, _ = exported(tmp_path, monkeypatch)
    importing(tmp_path, monkeypatch, to)  # a whole seed's record first: a damaged one removes it
    assert (seed_dir / "lab.lab0.import.json").exists()
    to.write_bytes(damage(to.read_bytes()))
    answer = importing(tmp_path, monkeypatch, to)
    assert not answer["ok"]
    assert says in answer["message"]
    if "remirror seed" not in says:  # refused before the disk changed: the record stays
        assert not (seed_dir / "lab.lab0.import.json").exists()


def test_an_export_never_writes_over_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed_dir: Path
) -> None:
    to, _, _ = exported(tmp_path, monkeypatch)
    before = to.read_bytes()
    a0 = str(tmp_path / "a0")
    answer = agent_seed.answer(
        {"do": "export", "profile": "lab", "mirror": "lab0", "site": "site-a", "disk": a0, "to": str(to)}
    )
    assert answer == {"ok": False, "message": f"{to} exists: a seed is written to a new file", "usage": True}
    assert to.read_bytes() == before


def test_a_seed_of_another_mirror_is_refused_and_the_disk_left_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed_dir: Path
) -> None:
    to, _, _ = exported(tmp_path, monkeypatch)
    b0 = tmp_path / "b0"
    stand_in(b0)
    with_facts(monkeypatch, {str(b0): DiskFacts(str(b0), True, "b0", SIZE, first_sector="zero")})
    request = {"do": "import", "profile": "lab", "mirror": "lab1", "disk": str(b0), "from": str(to)}
    answer = agent_seed.answer(request)
    assert "is of mirror lab0 of profile lab, not of lab1" in answer["message"]
    assert b0.read_bytes() == bytes(SIZE)


# --- the policy: a catch-up's copy only as the site's profiles pair it ----------------------


def test_a_copy_goes_only_from_a_seeded_mirrors_primary_leg_onto_its_replica(tmp_path: Path) -> None:
    text = keep_data_profile(tmp_path).read_text()
    path = tmp_path / "seeded.yaml"
    path.write_text(
        text.replace(
            "      on_link_loss: degrade\n", "      on_link_loss: degrade\n      initial_sync: seeded\n"
        )
    )
    profile = load_profile(path)
    mirror = profile.mirrors[0]
    scope = site_scope([("seeded.yaml", profile)])
    remote = replica_path(profile, mirror, mirror.replicas[0])
    ranges = (ByteRange(0, CHUNK),)
    Checker(scope).step(CopySpans("lab0", "/dev/lab/a0", remote, ranges, 60.0).as_dict())
    for source, target, says in [
        (remote, "/dev/lab/a0", "is not a seeded mirror's catch-up"),  # never onto the primary
        ("/dev/lab/a0", "/dev/lab/a0", "is not a seeded mirror's catch-up"),
    ]:
        with pytest.raises(Refused, match=says):
            Checker(scope).step(CopySpans("lab0", source, target, ranges, 60.0).as_dict())
    with pytest.raises(Refused, match="whole 4 KiB blocks"):
        Checker(scope).step(CopySpans("lab0", "/dev/lab/a0", remote, (ByteRange(1, 4096),), 60.0).as_dict())
    unseeded = site_scope([("keep.yaml", load_profile(keep_data_profile(tmp_path)))])
    with pytest.raises(Refused, match="is not a seeded mirror's catch-up"):
        Checker(unseeded).step(CopySpans("lab0", "/dev/lab/a0", remote, ranges, 60.0).as_dict())
    with pytest.raises(Refused, match="only where a profile pairs the disks"):
        Checker(None).step(CopySpans("lab0", "/dev/lab/a0", remote, ranges, 60.0).as_dict())
    with pytest.raises(Refused, match="only by this site's operator"):
        Checker(scope).request({"op": "seed", "do": "import", "disk": "/dev/lab/b0", "from": "/x"})
    # Reading a leg from its byte 0: only a seeded mirror's, a MiB at a time.
    Checker(scope).request({"op": "digest", "disk": "/dev/lab/a0", "spans": [[0, CHUNK]], "raw": True})
    for spans, says in [([[0, 2 * CHUNK]], "a MiB each at most"), ([[1, 4096]], "whole 4 KiB blocks")]:
        with pytest.raises(Refused, match=says):
            Checker(scope).request({"op": "digest", "disk": "/dev/lab/a0", "spans": spans, "raw": True})
    with pytest.raises(Refused, match="is not a seeded mirror's leg"):
        Checker(unseeded).request({"op": "digest", "disk": "/dev/lab/a0", "spans": [[0, 4096]], "raw": True})


def test_a_guard_no_catch_up_measured_fails_at_the_site() -> None:
    from remirror.protocol.steps import DeviceUnwritten

    with pytest.raises(RemirrorError, match="not measured by a catch-up in this apply"):
        agent_seed.device_unwritten(DeviceUnwritten("/dev/lab/a0"))


# --- the plan over a seed ------------------------------------------------------------------


def seeded_profile(tmp_path: Path) -> Path:
    path = keep_data_profile(tmp_path)
    path.write_text(
        path.read_text().replace(
            "      on_link_loss: degrade\n", "      on_link_loss: degrade\n      initial_sync: seeded\n"
        )
    )
    return path


def with_seeds(facts: dict[str, SiteFacts], made: SeedHeader | None, taken: SeedHeader | None) -> None:
    if made is not None:
        facts["site-a"] = dataclasses.replace(
            facts["site-a"], seeds=(SeedRecord("export", made, "/dev/lab/a0", 256 * MiB, made.created),)
        )
    if taken is not None:
        facts["site-b"] = dataclasses.replace(
            facts["site-b"], seeds=(SeedRecord("import", taken, "/dev/lab/b0", 256 * MiB, taken.created),)
        )


def seeded_facts(replica: tuple[Signature, ...] = ()) -> dict[str, SiteFacts]:
    facts = kept_facts(EXT4)
    b0 = dataclasses.replace(facts["site-b"].disks["/dev/lab/b0"], signatures=replica)
    facts["site-b"] = dataclasses.replace(facts["site-b"], disks={"/dev/lab/b0": b0})
    return facts


def test_a_replica_showing_the_seeds_file_system_alone_is_caught_up_again(tmp_path: Path) -> None:
    # A create that failed after it copied the first chunk: the catch-up compares every chunk.
    facts = seeded_facts((EXT4,))
    with_seeds(facts, seed_of_a0(), seed_of_a0())
    plan = make_plan(load_profile(seeded_profile(tmp_path)), facts, SECRETS)
    assert "CatchUpSeed" in [str(a.verb) for a in plan.actions]
    assert not plan.destructive


def test_a_seed_taken_onto_another_disk_than_the_profiles_is_refused(tmp_path: Path) -> None:
    facts = seeded_facts()
    with_seeds(facts, seed_of_a0(), None)
    taken = SeedRecord("import", seed_of_a0(), "/dev/lab/b9", 256 * MiB, 1.8e9)
    facts["site-b"] = dataclasses.replace(facts["site-b"], seeds=(taken,))
    with pytest.raises(PlanError, match=r"took seed 01234567 of .* onto /dev/lab/b9"):
        make_plan(load_profile(seeded_profile(tmp_path)), facts, SECRETS)


def seed_of_a0() -> SeedHeader:
    return header(size=255 * MiB)


def test_seeded_needs_keep_data(tmp_path: Path) -> None:
    from remirror.errors import ProfileError

    text = seeded_profile(tmp_path).read_text().replace("      keep_data: true\n", "")
    path = tmp_path / "blank.yaml"
    path.write_text(text)
    with pytest.raises(ProfileError, match=r"seeded needs primary\.keep_data: true"):
        load_profile(path)


def test_a_seeded_mirror_is_caught_up_then_made_without_a_sync_behind_guards(
    tmp_path: Path,
) -> None:
    facts = seeded_facts()
    with_seeds(facts, seed_of_a0(), seed_of_a0())
    plan = make_plan(load_profile(seeded_profile(tmp_path)), facts, SECRETS)
    assert not plan.destructive
    verbs = [str(a.verb) for a in plan.actions]
    assert verbs.index("CatchUpSeed") < verbs.index("CreateArray")
    catch_up = next(a for a in plan.actions if a.verb == "CatchUpSeed")
    step = catch_up.steps[0].as_dict()
    assert (step["source"], step["replica_site"], step["replica_device"]) == (
        "/dev/lab/a0",
        "site-b",
        "/dev/lab/b0",
    )
    create = next(a for a in plan.actions if a.verb == "CreateArray")
    kinds = [step.kind for step in create.steps]
    argv = create.steps[kinds.index("md_create")].as_dict()
    assert argv["assume_clean"] is True
    # Right before the create, each leg's guard: nothing wrote it since its catch-up measured it.
    guards = [step.as_dict() for step in create.steps if step.kind == "device_unwritten"]
    assert kinds[:4] == ["device_unwritten", "device_unwritten", "copy_spans", "md_create"]
    # The first chunk (the file system's superblock) copied in the create's own request.
    first = create.steps[2].as_dict()
    assert (first["target"], first["spans"]) == (step["target"], [{"offset": 0, "length": MiB}])
    assert [g["device"] for g in guards] == ["/dev/lab/a0", step["target"]]
    assert "written" not in guards[0]  # unmeasured (-1) until the catch-up runs: it fails so
    bound = measured({"/dev/lab/a0": (80, 8)}, create.steps[0]).as_dict()
    assert (bound["written"], bound["discarded"]) == (80, 8)
    assert step["size"] == argv["size"]  # what is compared is what the array holds
    assert "no initial sync (the replicas hold the seed, caught up)" in create.subject


SOMETHING = (Signature("xfs", 0, "bbbbbbbb-0000-0000-0000-000000000000"),)


@pytest.mark.parametrize(
    ("made", "taken", "replica", "says"),
    [
        (None, seed_of_a0(), (), "site site-a has made no seed of lab0: run `remirror seed export"),
        (seed_of_a0(), None, (), "site site-b holds no seed of lab0: run `remirror seed import"),
        (
            seed_of_a0(),
            dataclasses.replace(seed_of_a0(), seed="f" * 32),
            (),
            "site site-b holds seed ffffffff of 2027-01-15 08:00 UTC, and site site-a last made seed 01234567",
        ),
        (
            dataclasses.replace(seed_of_a0(), fs_uuid="aaaaaaaa-0000-0000-0000-000000000000"),
            dataclasses.replace(seed_of_a0(), fs_uuid="aaaaaaaa-0000-0000-0000-000000000000"),
            (),
            "site site-a's /dev/lab/a0 is no longer the disk seed 01234567",
        ),
        (
            dataclasses.replace(seed_of_a0(), size=128 * MiB),
            dataclasses.replace(seed_of_a0(), size=128 * MiB),
            (),
            "is no longer the disk seed 01234567",
        ),
        # Written since the import: mkfs, or the catch-up's first chunk and no create after it.
        (
            seed_of_a0(),
            seed_of_a0(),
            SOMETHING,
            "site site-b's /dev/lab/b0 has been written since it took seed",
        ),
        (
            seed_of_a0(),
            seed_of_a0(),
            (Signature("ext4", 0x438, "cccccccc-0000-0000-0000-000000000000", "new"),),
            "(it holds ext4 filesystem labelled 'new'",
        ),
    ],
)
def test_a_seed_that_cannot_tell_the_changes_apart_is_refused_with_the_reason_and_nothing_done(
    tmp_path: Path,
    made: SeedHeader | None,
    taken: SeedHeader | None,
    replica: tuple[Signature, ...],
    says: str,
) -> None:
    facts = seeded_facts(replica)
    with_seeds(facts, made, taken)
    with pytest.raises(PlanError) as error:
        make_plan(load_profile(seeded_profile(tmp_path)), facts, SECRETS)
    assert says in str(error.value)
    assert str(error.value).startswith(f"{tmp_path / 'keep.yaml'}:")


# --- the catch-up: what the controller compares and has copied -------------------------------


class FakeSite:
    """An agent client over a list of chunk contents: digests of them, copies into `into`."""

    def __init__(self, name: str, chunks: list[str], into: FakeSite | None = None) -> None:
        self.name, self.chunks, self.into = name, chunks, into
        self.copied: list[dict[str, Any]] = []
        self.written = 0  # sectors written to the source meanwhile (the block_stats counter)

    def digests(self, disk: str, spans: list[tuple[int, int]], raw: bool = False) -> list[str]:
        assert raw
        return [
            hashlib.blake2b(self.chunks[offset // CHUNK].encode(), digest_size=16).hexdigest()
            for offset, _ in spans
        ]

    def request(self, request: dict[str, Any]) -> dict[str, Any]:
        stat = f"0 0 0 0 0 0 {self.written} 0 0 0 0 0 0 0 0"
        return {"stats": dict.fromkeys(request["devices"], stat)}

    def run(self, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for step in steps:
            self.copied.append(step)
            assert self.into is not None
            for span in step["spans"]:
                for at in range(span["offset"], span["offset"] + span["length"], CHUNK):
                    self.into.chunks[at // CHUNK] = self.chunks[at // CHUNK]
        return [{"ok": True} for _ in steps]


def test_a_catch_up_copies_only_the_chunks_that_differ_but_the_first_and_checks_they_arrived() -> None:
    replica = FakeSite("site-b", ["", "x", "y", "d", "e", "z"])  # an import leaves chunk 0 out
    primary = FakeSite("site-a", ["a", "b", "c", "d", "e", "f"], into=replica)
    controller: Any = type("C", (), {"clients": {"site-a": primary, "site-b": replica}, "counters": {}})()
    step = CatchUpSeed("lab0", SEED_ID, "/dev/lab/a0", "/dev/sdx", "site-b", "/dev/lab/b0", 6 * CHUNK)
    caught = catch_up(controller, "site-a", step)
    assert caught.describe() == "4 of 6 chunks differed from the seed: 4 MiB copied"
    # Not the first: the create's request copies it, after its guards.
    assert [s["spans"] for s in primary.copied] == [
        [{"offset": CHUNK, "length": 2 * CHUNK}, {"offset": 5 * CHUNK, "length": CHUNK}]
    ]
    assert replica.chunks == ["", *primary.chunks[1:]]

    # A primary disk written meanwhile: nothing made over legs that may differ.
    replica.chunks = ["a", "x", "c", "d", "e", "f"]
    original = primary.run

    def written_meanwhile(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
        primary.written += 8
        return original(steps)

    primary.run = written_meanwhile  # type: ignore[method-assign]
    with pytest.raises(RemirrorError, match="was written during the catch-up"):
        catch_up(controller, "site-a", step)
    # A second replica's catch-up starts from the first's counters: moved since, refused.
    with pytest.raises(RemirrorError, match="was written during the catch-up"):
        catch_up(controller, "site-a", step, since=(0, 0))


def test_an_answer_that_is_not_a_digest_per_chunk_is_an_error_never_a_difference() -> None:
    replica = FakeSite("site-b", ["a"] * 4)
    replica.digests = lambda disk, spans, raw=False: ["0" * 32]  # type: ignore[method-assign]
    primary = FakeSite("site-a", ["a"] * 4, into=replica)
    controller: Any = type("C", (), {"clients": {"site-a": primary, "site-b": replica}, "counters": {}})()
    step = CatchUpSeed("lab0", SEED_ID, "/dev/lab/a0", "/dev/sdx", "site-b", "/dev/lab/b0", 4 * CHUNK)
    with pytest.raises(RemirrorError, match="site-b: answered other than a digest per chunk"):
        catch_up(controller, "site-a", step)
    assert primary.copied == []


def test_a_catch_up_copies_in_steps_a_link_carries_in_minutes() -> None:
    from remirror.catch_up import COPY_BYTES, _groups

    chunks = [ByteRange(i * CHUNK, CHUNK) for i in range(0, 200, 2)]  # every other chunk
    groups = list(_groups(chunks))
    assert all(sum(r.length for r in g) <= COPY_BYTES for g in groups)
    assert [r for g in groups for r in g] == chunks
    whole = list(_groups([ByteRange(i * CHUNK, CHUNK) for i in range(100)]))
    assert whole[0] == (ByteRange(0, COPY_BYTES),)
