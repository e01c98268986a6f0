"""The profile: the contract's meaning, and every rule with its exact location."""

from __future__ import annotations

import json
import re

import pytest

from remirror.errors import ProfileError
from remirror.profile import Profile, load_profile, parse_profile
from remirror.profile.timeouts import PRESETS
from tests.conftest import PROFILES, REPO

# Line numbers below are this text's: keep it stable, add new cases by
# replacing a line (see `edited`).
BASE = """\
version: 1
name: acme
sites:
  hq:
    host: local
  dr:
    host: ssh://root@dr.example:22
mirrors:
  - name: finance
    primary:
      site: hq
      disk: /dev/sda
    replicas:
      - site: dr
        disk: /dev/sdb
        portal: 192.0.2.20:3260
    replication:
      mode: sync
"""


def edited(old: str, new: str) -> str:
    """BASE with one unique piece replaced."""
    assert BASE.count(old) == 1, old
    return BASE.replace(old, new)


def problems(text: str) -> list[str]:
    """The problem lines the CLI would print for this profile text."""
    with pytest.raises(ProfileError) as caught:
        parse_profile(text, "p.yaml")
    return [str(p) for p in caught.value.problems]


# --- the contract and the shipped profiles -------------------------------


def test_base_profile_is_valid() -> None:
    profile = parse_profile(BASE, "p.yaml")
    assert profile.mirrors[0].md_device == "/dev/md/finance"


def test_through_a_wireguard_tunnel_a_replicas_portal_may_be_a_name() -> None:
    """The target listens on its tunnel address; the portal's host is the tunnel's endpoint,
    which WireGuard resolves."""
    text = edited("        portal: 192.0.2.20:3260\n", "        portal: dr.example:3260\n")
    assert parse_profile(
        text.replace("    replication:", "    transport: wireguard\n    replication:"), "p.yaml"
    )
    assert problems(text)[0].startswith(
        "p.yaml:16:9: mirrors[0].replicas[0].portal: dr.example:3260: a portal"
    )


@pytest.mark.parametrize("path", sorted(PROFILES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_profile_validates(path: object) -> None:
    load_profile(str(path))


# The contract marks lines that join it when an issue lands: "(issue N)", in the
# numbering of the contract's own roadmap (17: production deployment, 18: mirroring
# a disk that holds data). Add N here when that issue lands.
LANDED_CONTRACT_ISSUES: frozenset[int] = frozenset({17, 18})  # this project's issues 28 and 29


def contract_as_landed(text: str) -> str:
    """The contract without the lines of issues that have not landed yet."""
    kept = []
    for line in text.splitlines(keepends=True):
        marked = re.search(r"#.*\(issue (\d+)\)", line)
        if (
            marked
            and not line.lstrip().startswith("#")
            and int(marked.group(1)) not in LANDED_CONTRACT_ISSUES
        ):
            continue
        kept.append(line)
    return "".join(kept)


def test_contract_as_landed_drops_only_the_fields_of_issues_still_open() -> None:
    text = (
        "# a line marked (issue 18) in a comment stays\na: 1\nb: 2  # (issue 19) later\nc: 3  # (issue 18)\n"
    )
    assert (
        contract_as_landed(text)
        == "# a line marked (issue 18) in a comment stays\na: 1\nc: 3  # (issue 18)\n"
    )


def test_shipped_two_site_profile_is_the_contract() -> None:
    contract = REPO.parent / "shared" / "contract" / "two-site.yaml"
    assert contract.exists(), "CI runs with ../shared beside the checkout"
    assert (PROFILES / "two-site.yaml").read_text() == contract_as_landed(contract.read_text())


def test_contract_means_what_its_comments_say() -> None:
    profile = load_profile(PROFILES / "two-site.yaml")
    assert profile.sites["hq"].is_local
    dr = profile.sites["dr"]
    assert not dr.is_local
    assert (dr.ssh_address.user, dr.ssh_address.host, dr.ssh_address.port) == ("root", "dr.acme.example", 22)
    assert dr.ssh is not None
    assert dr.ssh.known_hosts == "/etc/remirror/known_hosts"

    finance = profile.mirror("finance")
    assert finance.md_device == "/dev/md/finance"
    assert finance.primary.cache is not None
    assert finance.primary.cache.type == "writecache"
    replica = finance.replicas[0]
    assert (replica.portal_address.address, replica.portal_address.port) == ("198.51.100.20", 3260)
    assert profile.replica_iqn(finance, replica) == "iqn.2026-11.example.acme:dr.finance"
    assert finance.replication.mode == "async"
    assert finance.replication.effective_write_behind == 4096
    assert finance.replication.bitmap_chunk == 64 * 1024**2
    assert finance.replication.on_link_loss == "degrade"
    # Issue 17's lines: the tunnel, the resync limit, the initial sync.
    assert finance.transport == "wireguard"
    assert finance.replication.resync_max == 40 * 1024**2
    assert finance.replication.initial_sync == "full"
    chap = profile.replica_chap(finance)
    assert chap is not None
    assert chap == finance.iscsi.chap
    assert chap.mutual
    assert chap.password_file == "/etc/remirror/finance.chap"
    assert chap.target_password_file == "/etc/remirror/finance.chap.mutual"
    settings = finance.iscsi.node_settings(finance.replication.on_link_loss)
    assert settings["node.session.cmds_max"] == "1024"  # the capstone's WAN finding
    assert (
        settings["node.conn[0].timeo.noop_out_timeout"]
        == PRESETS["wan"]["node.conn[0].timeo.noop_out_timeout"]
    )
    assert settings["node.session.timeo.replacement_timeout"] == "5"  # degrade: fail fast
    assert finance.cdp is not None
    assert (finance.cdp.every, finance.cdp.keep) == (60, 7 * 86400)
    assert finance.export is not None
    assert finance.export.initiators == ["iqn.2026-11.example.acme:app1"]

    mail = profile.mirror("mail")
    assert mail.replication.mode == "sync"
    assert mail.replication.effective_write_behind == 0
    # No CHAP in the profile: mutual CHAP all the same, with secrets `apply` generates.
    generated = profile.replica_chap(mail)
    assert generated is not None
    assert (generated.username, generated.mutual) == ("remirror-acme-mail", True)
    assert generated.password_file == "/etc/remirror/chap/acme.mail"
    assert generated.target_password_file == "/etc/remirror/chap/acme.mail.mutual"
    assert profile.replica_iqn(mail, mail.replicas[0]) == "iqn.2026-11.org.remirror:acme.mail.dr"
    # Issue 18's line: the mail disk's file system becomes the mirror's, in place.
    assert mail.primary.keep_data
    assert not finance.primary.keep_data


def test_wait_on_link_loss_queues_instead_of_failing() -> None:
    profile = parse_profile(edited("      mode: sync\n", "      mode: sync\n      on_link_loss: wait\n"))
    mirror = profile.mirrors[0]
    settings = mirror.iscsi.node_settings(mirror.replication.on_link_loss)
    assert int(settings["node.session.timeo.replacement_timeout"]) >= 86400


def test_custom_timeouts_override_the_lan_preset() -> None:
    text = BASE + "    iscsi:\n      timeouts:\n        node.conn[0].timeo.noop_out_timeout: 30\n"
    mirror = parse_profile(text).mirrors[0]
    settings = mirror.iscsi.node_settings("degrade")
    assert settings["node.conn[0].timeo.noop_out_timeout"] == "30"
    assert settings["node.session.timeo.replacement_timeout"] == "5"  # on_link_loss's
    assert settings["node.session.cmds_max"] == PRESETS["lan"]["node.session.cmds_max"]


@pytest.mark.parametrize("preset", ["lan", "wan"])
def test_every_preset_leaves_the_session_s_tcp_buffers_to_the_kernel(preset: str) -> None:
    # open-iscsi's default fixed window held a 14 ms WAN to 416 KB in flight (timeouts.py).
    text = BASE + f"    iscsi:\n      timeouts: {preset}\n"
    settings = parse_profile(text).mirrors[0].iscsi.node_settings("degrade")
    assert settings["node.conn[0].tcp.window_size"] == "0"


def test_a_custom_mapping_may_still_fix_the_tcp_window() -> None:
    text = BASE + "    iscsi:\n      timeouts:\n        node.conn[0].tcp.window_size: 1048576\n"
    settings = parse_profile(text).mirrors[0].iscsi.node_settings("degrade")
    assert settings["node.conn[0].tcp.window_size"] == "1048576"


def test_custom_timeouts_cannot_override_on_link_loss() -> None:
    # Safety, flow 10: a custom replacement timeout would turn `degrade` into `wait` unseen.
    text = BASE + "    iscsi:\n      timeouts:\n        node.session.timeo.replacement_timeout: 86400\n"
    with pytest.raises(ProfileError, match=r"chosen by replication\.on_link_loss"):
        parse_profile(text, "p.yaml")


def test_custom_timeouts_cannot_let_writes_overtake_each_other() -> None:
    # What async mode promises rests on each write's data following its command (timeouts.py).
    text = BASE + "    iscsi:\n      timeouts:\n        node.session.iscsi.InitialR2T: 'Yes'\n"
    with pytest.raises(ProfileError, match=r"node\.session\.iscsi\.InitialR2T is managed by remirror"):
        parse_profile(text, "p.yaml")


def test_where_points_at_profile_lines() -> None:
    profile = parse_profile(BASE, "p.yaml")
    assert profile.where("mirrors", 0, "replicas", 0, "disk") == "p.yaml:15:9"
    assert profile.where("mirrors", 0, "replication", "bitmap_chunk") == "p.yaml:17:5"


def test_json_schema_describes_the_profile() -> None:
    schema = Profile.model_json_schema()
    json.dumps(schema)
    assert set(schema["required"]) == {"version", "name", "sites", "mirrors"}
    assert schema["additionalProperties"] is False
    chunk = schema["$defs"]["Replication"]["properties"]["bitmap_chunk"]
    assert [alt["type"] for alt in chunk["anyOf"]] == ["integer", "string"]


# --- every rule: the exact line the CLI prints ----------------------------


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(
            "      mode: sync\n",
            "      mode: sync\n      write_behind: 16\n",
            "p.yaml:19:7: mirrors[0].replication.write_behind: only allowed with mode: async",
            id="write-behind-needs-async",
        ),
        pytest.param(
            "      mode: sync\n",
            "      mode: async\n      write_behind: 0\n",
            "p.yaml:19:7: mirrors[0].replication.write_behind: 0 makes async mode synchronous; use mode: sync",
            id="async-with-zero-backlog",
        ),
        pytest.param(
            "      mode: sync\n",
            "      mode: async\n      write_behind: 20000\n",
            "p.yaml:19:7: mirrors[0].replication.write_behind: input should be less than or equal to 16383",
            id="write-behind-range",
        ),
        pytest.param(
            "      mode: sync\n",
            "      mode: mirror\n",
            "p.yaml:18:7: mirrors[0].replication.mode: must be one of 'sync' or 'async', not 'mirror'",
            id="unknown-mode",
        ),
        pytest.param(
            "      site: hq\n",
            "      site: hx\n",
            "p.yaml:11:7: mirrors[0].primary.site: site 'hx' is not defined under sites (defined: dr, hq)",
            id="leg-site-undefined",
        ),
        pytest.param(
            "      - site: dr\n",
            "      - site: hq\n",
            "p.yaml:14:9: mirrors[0].replicas[0].site: mirror 'finance' already has a leg on site 'hq'"
            " (mirrors[0].primary)",
            id="two-legs-one-site",
        ),
        pytest.param(
            "        portal: 192.0.2.20:3260\n",
            "        portal: 192.0.2.20:99999\n",
            "p.yaml:16:9: mirrors[0].replicas[0].portal: '192.0.2.20:99999': port must be a number from 1 to 65535",
            id="portal-port",
        ),
        pytest.param(
            "        portal: 192.0.2.20:3260\n",
            "        portal: fe80::1:3260\n",
            "p.yaml:16:9: mirrors[0].replicas[0].portal: 'fe80::1:3260': write an IPv6 portal as [ADDRESS]:PORT",
            id="portal-ipv6-unbracketed",
        ),
        pytest.param(
            "        portal: 192.0.2.20:3260\n",
            "        portal: 'dr_site:3260'\n",
            "p.yaml:16:9: mirrors[0].replicas[0].portal: 'dr_site:3260': 'dr_site' is not an IP address or host name",
            id="portal-host",
        ),
        pytest.param(
            "        portal: 192.0.2.20:3260\n",
            "        portal: dr.example.net:3260\n",
            "p.yaml:16:9: mirrors[0].replicas[0].portal: dr.example.net:3260: a portal is an IP address, not a"
            " host name (the site's target listens on it, and the primary's sessions name it); write the"
            " address the primary reaches the site on, or use `transport: wireguard`, whose endpoint may be"
            " a name",
            id="portal-named",
        ),
        pytest.param(
            "  - name: finance\n",
            "  - name: Finance_1\n",
            "p.yaml:9:5: mirrors[0].name: 'Finance_1' is not a valid name: use 1-32 lower-case letters, digits"
            " and inner dashes (it becomes part of md array, LIO and iSCSI names)",
            id="mirror-name",
        ),
        pytest.param(
            "  dr:\n",
            "  DR:\n",
            "p.yaml:6:3: sites.DR: 'DR' is not a valid name: use 1-32 lower-case letters, digits"
            " and inner dashes (it becomes part of md array, LIO and iSCSI names)",
            id="site-name",
        ),
        pytest.param(
            "        portal: 192.0.2.20:3260\n",
            "        portal: 192.0.2.20:3260\n        iqn: iqn.2026-13.example:dr\n",
            "p.yaml:17:9: mirrors[0].replicas[0].iqn: 'iqn.2026-13.example:dr' is not an iSCSI qualified name"
            " (expected iqn.YYYY-MM.reversed.domain[:identifier], lower case)",
            id="iqn",
        ),
        pytest.param(
            "      disk: /dev/sda\n",
            "      disk: sda\n",
            "p.yaml:12:7: mirrors[0].primary.disk: 'sda' is not a device path under /dev/"
            " (prefer /dev/disk/by-id/...: sdX names change between boots)",
            id="disk-path",
        ),
        pytest.param(
            "        portal: 192.0.2.20:3260\n",
            "",
            "p.yaml:14:9: mirrors[0].replicas[0].portal: required key is missing",
            id="missing-portal",
        ),
        pytest.param(
            "version: 1\n",
            "version: 2\n",
            "p.yaml:1:1: version: unsupported profile version 2 (this remirror reads version 1)",
            id="version",
        ),
        pytest.param(
            "    host: ssh://root@dr.example:22\n",
            "    host: ftp://dr.example\n",
            "p.yaml:7:5: sites.dr.host: 'ftp://dr.example' is not a site host"
            " (expected 'local' or ssh://[user@]host[:port])",
            id="site-host",
        ),
        pytest.param(
            "    host: local\n",
            "    host: local\n    ssh: {known_hosts: /etc/kh}\n",
            "p.yaml:6:5: sites.hq.ssh: ssh options given for a local site",
            id="ssh-for-local-site",
        ),
        pytest.param(
            "      mode: sync\n",
            "      mode: sync\n      bitmap_chunk: 3MiB\n",
            "p.yaml:19:7: mirrors[0].replication.bitmap_chunk: must be a power of two of at least 4KiB"
            " (md bitmap chunk)",
            id="bitmap-chunk-power-of-two",
        ),
        pytest.param(
            "      mode: sync\n",
            "      mode: sync\n      bitmap_chunk: 64 megs\n",
            "p.yaml:19:7: mirrors[0].replication.bitmap_chunk: '64 megs': unknown size unit 'megs'"
            " (use K, M, G, KiB, MiB, GiB, MB, GB)",
            id="bitmap-chunk-unit",
        ),
        pytest.param(
            "  - name: finance\n",
            "  - name: finance\n    device: /dev/mapper/finance\n",
            "p.yaml:10:5: mirrors[0].device: '/dev/mapper/finance': the mirror device is an md array, /dev/md/NAME",
            id="device-not-md",
        ),
        pytest.param(
            "    replicas:\n      - site: dr\n        disk: /dev/sdb\n        portal: 192.0.2.20:3260\n",
            "    replicas: []\n",
            "p.yaml:13:5: mirrors[0].replicas: list should have at least 1 item after validation, not 0",
            id="no-replicas",
        ),
    ],
)
def test_a_broken_rule_is_reported_at_its_line(old: str, new: str, expected: str) -> None:
    assert problems(edited(old, new)) == [expected]


def test_a_disk_is_used_by_one_leg_only_across_mirrors() -> None:
    text = BASE + (
        "  - name: payroll\n"
        "    primary: {site: hq, disk: /dev/sdc}\n"
        "    replicas:\n"
        "      - {site: dr, disk: /dev/sdb, portal: 192.0.2.20}\n"
    )
    assert problems(text) == [
        "p.yaml:22:20: mirrors[1].replicas[0].disk: disk /dev/sdb on site 'dr' is already used by"
        " mirrors[0].replicas[0].disk"
    ]


def test_a_cache_disk_cannot_also_be_a_leg() -> None:
    text = edited("      disk: /dev/sda\n", "      disk: /dev/sda\n      cache: {disk: /dev/sda}\n")
    assert problems(text) == [
        "p.yaml:13:15: mirrors[0].primary.cache.disk: disk /dev/sda on site 'hq' is already used by"
        " mirrors[0].primary.disk"
    ]


def test_mirror_names_and_devices_are_unique() -> None:
    text = BASE + (
        "  - name: finance\n"
        "    primary: {site: hq, disk: /dev/sdc}\n"
        "    replicas: [{site: dr, disk: /dev/sdd, portal: 192.0.2.20}]\n"
    )
    assert problems(text) == [
        "p.yaml:19:5: mirrors[1].device: device /dev/md/finance is already used by mirrors[0]",
        "p.yaml:19:5: mirrors[1].name: mirror name 'finance' is already used by mirrors[0]",
        "p.yaml:21:16: mirrors[1].replicas[0].iqn: target name iqn.2026-11.org.remirror:acme.finance.dr"
        " is already used by mirrors[0].replicas[0].iqn",
    ]


def test_a_primary_legs_target_name_is_no_other_targets() -> None:
    # A promotion exports the primary's leg under its name: the export's, and the DR site's scope
    # would merge the two targets (the export's initiators and CHAP on the leg's target).
    text = BASE.replace(
        "      disk: /dev/sda\n", "      disk: /dev/sda\n      iqn: iqn.2026-11.example.acme:hq.finance\n"
    )
    text += "    export: {iqn: iqn.2026-11.example.acme:hq.finance, portal: 0.0.0.0:3260, initiators: [iqn.2026-11.example.acme:app]}\n"
    assert problems(text) == [
        "p.yaml:20:14: mirrors[0].export.iqn: target name iqn.2026-11.example.acme:hq.finance is already used"
        " by mirrors[0].primary.iqn"
    ]


def test_inline_secrets_are_refused_with_where_they_belong() -> None:
    text = BASE + "    iscsi:\n      chap:\n        username: finance\n        password: hunter2hunter2\n"
    assert problems(text) == [
        "p.yaml:20:7: mirrors[0].iscsi.chap.password_file: required key is missing",
        "p.yaml:22:9: mirrors[0].iscsi.chap.password: inline secrets are not accepted: put the secret in a"
        " file (mode 0600) and name it with password_file",
    ]


def test_secret_never_appears_in_the_error() -> None:
    text = BASE + "    iscsi:\n      chap: {username: f, password: hunter2hunter2, password_file: /x}\n"
    assert not any("hunter2" in line for line in problems(text))


def test_mutual_chap_options_need_mutual() -> None:
    text = BASE + "    iscsi:\n      chap: {username: f, password_file: /s, mutual_password_file: /t}\n"
    assert problems(text) == [
        "p.yaml:20:46: mirrors[0].iscsi.chap.mutual_password_file: only allowed with mutual: true"
    ]


def test_mutual_chap_secrets_differ() -> None:
    text = BASE + (
        "    iscsi:\n      chap: {username: f, password_file: /s, mutual: true, mutual_password_file: /s}\n"
    )
    assert problems(text) == [
        "p.yaml:20:60: mirrors[0].iscsi.chap.mutual_password_file: must differ from password_file"
    ]


@pytest.mark.parametrize(
    ("timeouts", "message"),
    [
        ("slow", "'slow' is not a preset (lan, wan) or a mapping of iscsiadm keys"),
        ("{session.timeo: 5}", "'session.timeo' is not an iscsiadm node key (they start with 'node.')"),
        (
            "{node.session.auth.password: x}",
            "node.session.auth.password is managed by remirror and cannot be set here",
        ),
        ("{node.startup: manual}", "node.startup is managed by remirror and cannot be set here"),
    ],
)
def test_timeouts_are_a_preset_or_iscsiadm_keys(timeouts: str, message: str) -> None:
    text = BASE + f"    iscsi:\n      timeouts: {timeouts}\n"
    assert problems(text) == [f"p.yaml:20:7: mirrors[0].iscsi.timeouts: {message}"]


def test_cdp_window_longer_than_interval() -> None:
    text = BASE + "    cdp: {every: 1h, keep: 10m}\n"
    assert problems(text) == [
        "p.yaml:19:22: mirrors[0].cdp.keep: the protection window is shorter than the interval between points"
    ]


def test_cdp_durations_are_human() -> None:
    text = BASE + "    cdp: {every: 1 hour, keep: 7d}\n"
    assert problems(text) == [
        "p.yaml:19:11: mirrors[0].cdp.every: '1 hour' is not a duration (examples: 500ms, 60s, 5m, 1h30m, 7d)"
    ]


def test_export_needs_initiators() -> None:
    text = BASE + "    export: {iqn: 'iqn.2026-11.example.acme:hq.finance', initiators: []}\n"
    assert problems(text) == [
        "p.yaml:19:58: mirrors[0].export.initiators: list should have at least 1 item after validation, not 0"
    ]


def test_duplicate_keys_are_refused() -> None:
    text = edited("      disk: /dev/sda\n", "      disk: /dev/sda\n      disk: /dev/sdz\n")
    assert problems(text) == ['p.yaml:13:7: YAML: duplicate key "disk"']


def test_broken_yaml_is_located() -> None:
    text = edited("      site: hq\n", "      site: [hq\n")
    (line,) = problems(text)
    assert line.startswith("p.yaml:12:")
    assert "YAML:" in line


def test_a_profile_must_be_a_mapping() -> None:
    assert problems("- just\n- a list\n") == [
        "p.yaml:1:1: a profile is a mapping (version, name, sites, mirrors)"
    ]


def test_several_problems_come_in_line_order() -> None:
    text = edited("  - name: finance\n", "  - name: Finance\n").replace("version: 1", "version: 9")
    lines = problems(text)
    assert [line.split(":")[1] for line in lines] == ["1", "9"]


def test_unknown_key_and_missing_key_are_both_reported() -> None:
    assert problems(edited("      disk: /dev/sda\n", "      dsik: /dev/sda\n")) == [
        "p.yaml:10:5: mirrors[0].primary.disk: required key is missing",
        "p.yaml:12:7: mirrors[0].primary.dsik: unknown key",
    ]


def test_missing_file_is_one_line(tmp_path: object) -> None:
    with pytest.raises(ProfileError) as caught:
        load_profile("/nonexistent/profile.yaml")
    assert (
        str(caught.value) == "/nonexistent/profile.yaml:1:1: cannot read profile: No such file or directory"
    )


@pytest.mark.parametrize(
    ("old", "new", "where"),
    [
        ("  - name: finance\n", '  - name: finance\n    device: "/dev/md/x\\nARRAY /dev/md/y"\n', "device"),
        ("disk: /dev/sda", 'disk: "/dev/sda\\r"', "disk"),
        (
            "      mode: sync\n",
            '      mode: sync\n    iscsi:\n      timeouts: {"node.x\\u0001": 1}\n',
            "timeouts",
        ),
    ],
)
def test_control_characters_never_reach_a_config_file(old: str, new: str, where: str) -> None:
    # Safety, flow 10: names and paths are written one per line into mdadm.conf and node records.
    (problem,) = problems(edited(old, new))
    assert problem.startswith("p.yaml:")
    assert where in problem
    assert "control character" in problem


# --- warnings: valid, but open to others on the network ---------------------------------------


def warned(text: str) -> list[str]:
    from remirror.profile import cautions

    return [f"{w.line}: {w.path}: {w.message.split(':')[0]}" for w in cautions(parse_profile(text, "p.yaml"))]


WITH_CHAP = "    iscsi:\n      chap: {username: u, password_file: /etc/remirror/c}\n"


def test_a_portal_on_a_public_address_is_warned_of_clear_text() -> None:
    assert warned(BASE + WITH_CHAP) == []  # 192.0.2.20: a documentation address, not global
    public = edited("portal: 192.0.2.20:3260", "portal: 8.8.4.4:3260") + WITH_CHAP
    assert warned(public) == ["16: mirrors[0].replicas[0].portal: 8.8.4.4 is a public address"]
    for private in ("10.1.2.3", "172.16.0.9", "192.168.1.20", "[fd00::20]", "100.64.0.9"):
        assert warned(edited("portal: 192.0.2.20:3260", f'portal: "{private}:3260"') + WITH_CHAP) == [], (
            private
        )


def test_a_mirror_without_chap_and_an_export_on_every_address_are_warned() -> None:
    assert warned(BASE) == []  # no CHAP given: apply generates it
    assert warned(BASE + "    iscsi: {chap: none}\n") == ["19: mirrors[0].iscsi.chap: none"]
    export = (
        BASE + WITH_CHAP + "    export: {iqn: iqn.2026-11.example:app, initiators: [iqn.2026-11.example:h]}\n"
    )
    assert warned(export) == ["21: mirrors[0].export.portal: the export listens on every address of the site"]
