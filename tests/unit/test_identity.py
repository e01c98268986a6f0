"""One profile for every site: which site this host is (remirror.profile.identity, remirror.here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from remirror.cli.app import SITE_VARIABLE as CLI_SITE_VARIABLE
from remirror.errors import ProfileError, UsageError
from remirror.here import SITE_VARIABLE, load_profile_here, this_host
from remirror.profile import parse_profile
from remirror.profile.identity import Here, as_seen_here, find_site, seen_from, site_here

# Copied unchanged to both hosts: every site by the address the others reach it at.
ONE = """\
version: 1
name: acme
sites:
  hq:
    host: ssh://root@hq.acme.example
    ssh: {identity_file: /etc/remirror/id_ed25519, known_hosts: /etc/remirror/known_hosts}
  dr:
    host: ssh://root@backup-7.acme.example:2222
    ssh: {identity_file: /etc/remirror/id_ed25519, known_hosts: /etc/remirror/known_hosts}
mirrors:
  - name: data
    primary: {site: hq, disk: /dev/disk/by-id/ata-EXAMPLE_DISK_0001}
    replicas:
      - {site: dr, disk: /dev/disk/by-id/ata-EXAMPLE_DISK_0002, portal: "198.51.100.20:3260"}
"""
# A profile written for one site, as every profile was before: it says which site it is.
VIEW = ONE.replace(
    "  hq:\n    host: ssh://root@hq.acme.example\n"
    "    ssh: {identity_file: /etc/remirror/id_ed25519, known_hosts: /etc/remirror/known_hosts}\n",
    "  hq: {host: local}\n",
)
assert VIEW != ONE


def locals_of(text: str, here: Here) -> list[str]:
    profile = as_seen_here(parse_profile(text, "p.yaml"), here)
    return [name for name, site in profile.sites.items() if site.is_local]


@pytest.mark.parametrize(
    ("hostname", "site"),
    [
        ("hq", "hq"),  # the site's name
        ("hq.acme.example", "hq"),  # the ssh:// host
        ("HQ.acme.example", "hq"),  # host names are not case-sensitive
        ("backup-7.acme.example", "dr"),
        ("dr", "dr"),
    ],
)
def test_each_host_finds_its_own_site_in_the_same_file_by_its_whole_host_name(
    hostname: str, site: str
) -> None:
    assert locals_of(ONE, Here(hostname=hostname)) == [site]


@pytest.mark.parametrize(
    "hostname",
    [
        "backup-7",  # the ssh:// host's first label: not its name
        "dr.elsewhere.example",  # a site's name as a first label: another host
        "laptop",
        "",
    ],
)
def test_a_host_none_of_whose_whole_names_is_a_sites_is_refused_naming_the_profile(hostname: str) -> None:
    with pytest.raises(ProfileError) as refused:
        as_seen_here(parse_profile(ONE, "p.yaml"), Here(hostname=hostname))
    assert str(refused.value) == (
        f"p.yaml:3:1: sites: this host's name ({hostname or 'none'}) is none of its sites (dr, hq):"
        " say which with --site NAME or in /etc/remirror/site"
    )


def test_a_primary_named_like_the_dr_sites_first_label_is_not_taken_for_it() -> None:
    # The review's case: hq reached at an address, dr at db1.dr.example; the primary's host
    # is db1 (or db1.hq.example). It is none of the sites, not dr.
    text = ONE.replace("ssh://root@hq.acme.example", "ssh://root@203.0.113.5").replace(
        "backup-7.acme.example:2222", "db1.dr.example"
    )
    for hostname in ("db1", "db1.hq.example"):
        with pytest.raises(ProfileError, match="is none of its sites"):
            site_here(parse_profile(text, "p.yaml"), Here(hostname=hostname))
    assert site_here(parse_profile(text, "p.yaml"), Here(hostname="203.0.113.5")) == "hq"


def test_the_site_found_is_local_and_drops_the_ssh_options_the_others_reach_it_with() -> None:
    profile = seen_from(parse_profile(ONE, "p.yaml"), "dr")
    assert profile.sites["dr"].host == "local"
    assert profile.sites["dr"].ssh is None
    assert profile.sites["hq"].host == "ssh://root@hq.acme.example"
    assert profile.sites["hq"].ssh is not None
    # The file and its positions stay with it: later messages still point at its lines.
    assert profile.where("mirrors", 0, "primary") == "p.yaml:12:5"


def test_a_name_given_or_in_the_site_file_names_a_host_its_host_name_does_not() -> None:
    assert locals_of(ONE, Here(named="dr", hostname="laptop")) == ["dr"]
    assert locals_of(ONE, Here(site_file="dr", hostname="laptop")) == ["dr"]
    # The name given first: --site over the site file.
    assert find_site(parse_profile(ONE, "p.yaml"), Here(named="hq", site_file="dr")) == ("hq", "--site")
    assert find_site(parse_profile(ONE, "p.yaml"), Here(site_file="dr", hostname="dr")) == (
        "dr",
        "/etc/remirror/site",
    )
    assert find_site(parse_profile(ONE, "p.yaml"), Here(hostname="dr")) == ("dr", "its host name dr")


@pytest.mark.parametrize(
    ("here", "message"),
    [
        (
            Here(named="backup", hostname="hq"),
            "--site names 'backup', which is not one of its sites (dr, hq)",
        ),
        (
            Here(site_file="DR", hostname="laptop"),  # names are matched exactly
            "/etc/remirror/site names 'DR', which is not one of its sites (dr, hq)",
        ),
        # A host cloned from the primary, renamed dr, its site file still saying hq.
        (
            Here(site_file="hq", hostname="backup-7.acme.example"),
            "/etc/remirror/site names 'hq', but this host's name (backup-7.acme.example) is site dr's",
        ),
        (Here(named="hq", hostname="dr"), "--site names 'hq', but this host's name (dr) is site dr's"),
    ],
)
def test_a_name_given_that_is_no_site_or_another_than_the_hosts_is_refused(here: Here, message: str) -> None:
    with pytest.raises(ProfileError) as refused:
        as_seen_here(parse_profile(ONE, "p.yaml"), here)
    assert message in str(refused.value)


def test_a_host_named_as_two_sites_is_refused_unless_told_which() -> None:
    # dr's ssh:// host is hq's name: the host named hq could be either.
    text = ONE.replace("backup-7.acme.example:2222", "hq:2222")
    for here in (Here(hostname="hq"), Here(hostname="hq", site_file="backup")):
        with pytest.raises(ProfileError, match=r"this host \(hq\) is named as the sites dr, hq"):
            as_seen_here(parse_profile(text, "p.yaml"), here)
    # Told which of the two, as the refusal asks: that one.
    assert site_here(parse_profile(text, "p.yaml"), Here(hostname="hq", site_file="dr")) == "dr"


def test_a_profile_written_for_one_site_keeps_meaning_that_site() -> None:
    # On a host whose name is no other site's: as before one file served every site.
    assert locals_of(VIEW, Here(hostname="laptop")) == ["hq"]
    assert locals_of(VIEW, Here(hostname="hq")) == ["hq"]
    assert locals_of(VIEW, Here(named="hq", hostname="laptop")) == ["hq"]


def test_a_profile_written_for_one_site_on_another_sites_host_is_refused() -> None:
    # The contract's profile (hq `host: local`) copied unchanged to the DR host: acting as hq
    # there would make hq's disks the DR host's.
    with pytest.raises(ProfileError, match=r"written for 'hq' \(its `host: local`\), but this host's name"):
        site_here(parse_profile(VIEW, "p.yaml"), Here(hostname="backup-7.acme.example"))
    with pytest.raises(ProfileError, match="the profile was written for 'hq'"):
        site_here(parse_profile(VIEW, "p.yaml"), Here(named="dr"))
    with pytest.raises(ProfileError, match="/etc/remirror/site names 'dr', but the profile was written for"):
        site_here(parse_profile(VIEW, "p.yaml"), Here(site_file="dr"))


def test_this_host_reads_the_variable_the_site_file_and_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site_file = tmp_path / "site"
    monkeypatch.delenv(SITE_VARIABLE, raising=False)
    assert this_host(site_file=site_file).named is None
    assert this_host(site_file=site_file).site_file is None
    assert this_host(site_file=site_file).hostname  # uname -n
    site_file.write_text("dr\n")
    assert this_host(site_file=site_file).site_file == "dr"
    monkeypatch.setenv(SITE_VARIABLE, "hq")
    assert this_host(site_file=site_file).named == "hq"
    # An agent another site started reads no variable: what reaches it never chooses its site.
    assert this_host(environment=False, site_file=site_file).named is None
    site_file.write_text("dr hq\n")
    with pytest.raises(UsageError, match="holds 2 words; it names this host's site, one word"):
        this_host(site_file=site_file)


def test_load_profile_here_makes_the_named_site_local(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "acme.yaml"
    path.write_text(ONE)
    monkeypatch.setenv(SITE_VARIABLE, "dr")
    profile = load_profile_here(path)
    assert [name for name, site in profile.sites.items() if site.is_local] == ["dr"]


def test_the_command_lines_variable_is_the_one_profiles_are_loaded_with() -> None:
    assert CLI_SITE_VARIABLE == SITE_VARIABLE


def test_the_shipped_small_profile_is_one_file_for_both_of_its_hosts() -> None:
    from remirror.profile import load_profile
    from tests.conftest import PROFILES

    profile = load_profile(PROFILES / "single-mirror.yaml")
    assert not [name for name, site in profile.sites.items() if site.is_local]
    assert site_here(profile, Here(hostname="files.example.net")) == "office"
    assert site_here(profile, Here(hostname="backup.example.net")) == "offsite"
    assert site_here(profile, Here(hostname="backup", site_file="offsite")) == "offsite"
    # No secret file to make first: apply makes the CHAP secrets (docs/security.md).
    assert profile.mirrors[0].iscsi.chap is None
