"""The bench's peer (remirror.lab.hosts.drbd): its resource file from typed fields, and
/proc/drbd as DRBD 8.4 prints it.

The recorded /proc/drbd texts come from bench/peer.py on the hosts' lab (Debian 12's kernel
6.1.0-57-amd64, DRBD 8.4.11 with drbd-utils 9.22.0-1): in sync after the first sync, during
that sync, and on the primary while the link was cut.
"""

from __future__ import annotations

import pytest

from remirror.lab.hosts import drbd

IN_SYNC = """version: 8.4.11 (api:1/proto:86-101)
srcversion: F73C670A7EC572DB9CF3E5B 

 1: cs:Connected ro:Primary/Secondary ds:UpToDate/UpToDate C r-----
    ns:524236 nr:0 dw:0 dr:524236 al:8 bm:0 lo:0 pe:0 ua:0 ap:0 ep:1 wo:f oos:0
"""  # noqa: W291 - as the kernel prints it


def pair(**changes: object) -> drbd.Resource:
    fields: dict[str, object] = {
        "name": "peer",
        "protocol": "C",
        "primary": drbd.End("site-a", "192.0.2.1", "/dev/lab/a1"),
        "secondary": drbd.End("site-b", "192.0.2.2", "/dev/lab/b1"),
        "minor": 1,
    }
    fields.update(changes)
    return drbd.Resource(**fields)  # type: ignore[arg-type]


def test_the_resource_file_holds_both_ends_and_the_user_guide_s_tuning() -> None:
    text = pair(tuning=drbd.Tuning(c_max_rate="7000k", c_fill_target="3500k")).text()
    assert text.startswith("resource peer {\n")
    for line in (
        "protocol C;", "max-buffers 8000;", "max-epoch-size 8000;", "sndbuf-size 0;", "al-extents 3389;", "ping-timeout 5;",
        "c-plan-ahead 20;", "c-fill-target 3500k;", "c-max-rate 7000k;",
        "on site-a {", "disk /dev/lab/a1;", "address 192.0.2.1:7789;", "device /dev/drbd1;",
        "on site-b {", "disk /dev/lab/b1;", "address 192.0.2.2:7789;", "meta-disk internal;",
    ):  # fmt: skip
        assert f"\t{line}\n" in text or f"\t\t{line}\n" in text, line
    assert text.count("{") == text.count("}")
    # Disk flushes stay on: the guide turns them off only behind a battery-backed cache.
    assert "flushes" not in text


def test_write_ordering_off_turns_off_flushes_barriers_and_the_drain_and_nothing_else() -> None:
    drained, undrained = pair().text(), pair(tuning=drbd.Tuning(drain=False)).text()
    added = [line for line in undrained.splitlines() if line not in drained.splitlines()]
    assert added == ["\t\tdisk-flushes no;", "\t\tdisk-barrier no;", "\t\tdisk-drain no;"]
    assert undrained.index("disk-drain no;") < undrained.index("on site-a {")  # in the disk section
    assert undrained.count("{") == undrained.count("}")
    assert pair().settings()["drain"] is True  # recorded beside the results, as every option


def test_the_settings_recorded_beside_the_results_name_the_protocol_and_every_option() -> None:
    settings = pair(protocol="A").settings()
    assert settings["protocol"] == "A"
    assert {"max_buffers", "sndbuf_size", "al_extents", "c_plan_ahead", "c_fill_target", "c_max_rate"} <= set(
        settings
    )


@pytest.mark.parametrize(
    "changes",
    [
        {"name": "peer; reboot"},
        {"name": "Peer"},
        {"protocol": "B"},
        {"minor": 256},
        {"port": 80},
        {"secondary": drbd.End("site-a", "192.0.2.2", "/dev/lab/b1")},
    ],
)
def test_a_resource_that_is_not_plainly_one_is_refused(changes: dict[str, object]) -> None:
    with pytest.raises(drbd.DrbdError):
        pair(**changes)


@pytest.mark.parametrize(
    ("host", "address", "disk"),
    [
        ("site-a\n\ton evil", "192.0.2.1", "/dev/lab/a1"),
        ("site-a", "2001:db8::1", "/dev/lab/a1"),
        ("site-a", "192.0.2.1", "/dev/lab/a1;\n}"),
        ("site-a", "192.0.2.1", "/dev/../etc/passwd"),
        ("site-a", "192.0.2.1", "lab/a1"),
    ],
)
def test_an_end_that_is_not_plainly_a_host_an_address_and_a_device_is_refused(
    host: str, address: str, disk: str
) -> None:
    with pytest.raises((drbd.DrbdError, ValueError)):
        drbd.End(host, address, disk)


def test_a_size_that_is_not_one_is_refused() -> None:
    with pytest.raises(drbd.DrbdError):
        drbd.Tuning(c_max_rate="100M; }")


def test_proc_drbd_in_sync_is_read_with_its_counters() -> None:
    states = drbd.parse_proc_drbd(IN_SYNC)
    assert list(states) == [1]
    state = states[1]
    assert state.connection == "Connected"
    assert state.roles == ("Primary", "Secondary")
    assert state.disks == ("UpToDate", "UpToDate")
    assert state.protocol == "C"
    assert state.in_sync
    assert state.counters["ns"] == 524236
    assert state.counters["oos"] == 0
    assert state.write_ordering == "f"  # flush: the drain at each barrier is on
    assert drbd.parse_proc_drbd(IN_SYNC.replace("wo:f", "wo:n"))[1].write_ordering == "n"


def test_no_minor_is_read_from_a_module_with_none_configured() -> None:
    assert (
        drbd.parse_proc_drbd("version: 8.4.11 (api:1/proto:86-101)\nsrcversion: F73C670A7EC572DB9CF3E5B \n")
        == {}
    )
    assert drbd.parse_proc_drbd("") == {}
