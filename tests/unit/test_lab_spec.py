"""The lab's pure parts: what a lab holds, WAN settings, finding a kernel."""

from __future__ import annotations

from pathlib import Path

import pytest

from remirror.lab import host
from remirror.lab.spec import LabSpec, Wan


def test_default_lab_has_four_disks_per_site_and_a_fast_disk_each() -> None:
    spec = LabSpec()
    paths = [d.path for d in spec.disks]
    assert paths == [
        *(f"/dev/lab/a{i}" for i in range(4)),
        *(f"/dev/lab/b{i}" for i in range(4)),
        "/dev/lab/a-fast0",
        "/dev/lab/b-fast0",
    ]
    assert {d.size for d in spec.disks if "fast" not in d.name} == {256 * 1024**2}
    assert {d.size for d in spec.disks if "fast" in d.name} == {64 * 1024**2}


def test_a_disk_model_makes_the_data_disks_hdds_and_the_cache_disks_ssds() -> None:
    spec = LabSpec(disks_per_site=2, disk_model="hdd")
    assert {d.name: d.model for d in spec.disks} == {
        "a0": "hdd",
        "a1": "hdd",
        "b0": "hdd",
        "b1": "hdd",
        "a-fast0": "ssd",
        "b-fast0": "ssd",
    }
    assert {d.model for d in LabSpec().disks} == {""}


def test_spec_round_trips_through_json() -> None:
    spec = LabSpec(disks_per_site=1, wan=Wan(delay="7ms", rate="45mbit"), command=("pytest", "-q"))
    assert LabSpec.from_json(spec.to_json()) == spec
    modelled = LabSpec(
        disk_model="hdd",
        host_probes={"cpu": 5e-8, "syscall": 3e-7, "tcp_round_trip": 5e-5, "block_write": 3e-5},
    )
    assert LabSpec.from_json(modelled.to_json()) == modelled


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"disks_per_site": 0}, "--disks must be 1 to 16"),
        ({"disk_size": 1024**2}, "--disk-size must be at least 16MiB"),
        ({"disk_model": "tape"}, "--disk-model 'tape': expected hdd"),
        ({"disk_model": "hdd", "disk_size": 100 * 1024**2 + 4096}, "--disk-size must be a multiple of 1MiB"),
        ({"fast_disk_size": 8 * 1024**2}, "--fast-disk-size must be at least 16MiB"),
        (
            {"disk_model": "hdd", "fast_disk_size": 100 * 1024**2 + 4096},
            "--fast-disk-size must be a multiple",
        ),
        ({"dilation": 30.0}, "--dilation needs a --disk-model"),
    ],
)
def test_bad_lab_settings_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LabSpec(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("7ms", ["delay", "7ms"]),
        ("delay=7ms,jitter=1ms", ["delay", "7ms", "1ms"]),
        ("delay=25ms,rate=1mbit", ["delay", "25ms", "rate", "1mbit"]),
        ("rate=45mbit,loss=0.5%", ["rate", "45mbit", "loss", "0.5%"]),
    ],
)
def test_wan_specs_become_netem_arguments(text: str, args: list[str]) -> None:
    assert Wan.parse(text).netem_args() == args


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("seven", "expected a time such as 7ms"),
        ("jitter=1ms", "jitter needs a delay"),
        ("delay=7ms,rate=fast", "expected e.g. 1mbit"),
        ("loss=5", "expected a percentage"),
        ("latency=7ms", "'latency' is not a WAN setting"),
    ],
)
def test_bad_wan_specs_are_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Wan.parse(text)


def test_wan_delay_in_seconds() -> None:
    assert Wan(delay="7ms").one_way_delay_seconds == pytest.approx(0.007)
    assert Wan(delay="500us").one_way_delay_seconds == pytest.approx(0.0005)


def test_find_kernel_wants_the_storage_modules(tmp_path: Path) -> None:
    boot, modules = tmp_path / "boot", tmp_path / "modules"
    boot.mkdir()
    for version in ("6.1.0-1-amd64", "6.1.0-2-amd64"):
        (boot / f"vmlinuz-{version}").write_text("")
    assert host.find_kernel(boot, modules) is None
    md = modules / "6.1.0-1-amd64" / "kernel" / "drivers" / "md"
    md.mkdir(parents=True)
    (md / "raid1.ko").write_text("")
    (md / "dm-writecache.ko.xz").write_text("")
    assert host.find_kernel(boot, modules) == str(boot / "vmlinuz-6.1.0-1-amd64")


def test_missing_prerequisites_are_named_in_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("sys.executable", str(tmp_path / "python"))
    monkeypatch.setattr(host, "find_kernel", lambda: None)
    with pytest.raises(host.LabError) as caught:
        host.find_prerequisites()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("lab: missing qemu-system-x86_64 (Debian package qemu-system-x86), virtme-ng")
    assert "linux-image-amd64" in message
    assert message.endswith(host.INSTALL_HINT)
    assert caught.value.exit_code == 124


def test_the_lab_names_come_from_the_lab_profile_as_remirror_derives_them() -> None:
    from remirror.lab.probes import lab_names

    names = lab_names()
    assert (names.mirror, names.md, names.local_disk, names.remote_disk) == (
        "lab0",
        "/dev/md/lab0",
        "/dev/lab/a0",
        "/dev/lab/b0",
    )
    assert names.iqn == "iqn.2026-11.org.remirror:lab.lab0.site-b"
    assert names.remote_leg == f"/dev/disk/by-path/ip-192.0.2.2:3260-iscsi-{names.iqn}-lun-0"
    assert names.cdp_volume == "/dev/mapper/remirror-lab0-cdp"
