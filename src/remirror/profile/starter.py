"""The profile `remirror init` writes: two hosts, a disk on each, a mode. Pure.

The text is YAML as an operator would write it (one flow mapping per site and leg, comments
that say what to look at), and it is loaded back through the loader before anything is
written, so a profile `init` writes always validates. One file for both sites: each site is
written with the address the other reaches it at (remirror.profile.identity).
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass
from typing import Literal

from remirror.profile.loader import parse_profile
from remirror.profile.model import Profile
from remirror.profile.types import check_device_path, check_name, parse_ssh_address

SITE_KEY = "/etc/remirror/id_ed25519"
KNOWN_HOSTS = "/etc/remirror/known_hosts"
ISCSI_PORT = 3260


@dataclass(frozen=True)
class Starter:
    """What `init` asks: the profile's name, each host (as the other reaches it: a name or an
    address) with its disk, and the mode."""

    name: str
    primary_host: str
    primary_disk: str
    dr_host: str
    dr_disk: str
    mode: Literal["sync", "async"] = "sync"
    # The IP address the primary's iSCSI reaches the DR host at, and its target listens on
    # (a portal is an address: remirror.profile.rules); empty: `dr_host`, when it is one.
    dr_address: str = ""


def check_answers(answers: Starter) -> dict[str, str]:
    """What is wrong with each answer, by its option (`--dr-disk`: why); empty when all are
    right. Checked before any YAML is made of them: a disk path or a host is never text that
    could become another key of the profile."""
    problems: dict[str, str] = {}
    checks = (
        ("--name", answers.name, lambda v: check_name(v)),
        ("--primary", answers.primary_host, lambda v: parse_ssh_address(f"ssh://root@{_bracketed(v)}")),
        ("--dr", answers.dr_host, lambda v: parse_ssh_address(f"ssh://root@{_bracketed(v)}")),
        ("--primary-disk", answers.primary_disk, _disk),
        ("--dr-disk", answers.dr_disk, _disk),
        ("--dr-address", answers.dr_address, _address),
    )
    for option, value, check in checks:
        try:
            check(value)
        except ValueError as error:
            problems[option] = str(error)
    return problems


def _address(value: str) -> None:
    if not value:
        return  # not given: the DR host's own, if it is an address (remirror.onboarding resolves a name)
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise ValueError(
            f"{value!r} is not an IP address: the DR host's iSCSI target listens on one (give it)"
        ) from None


def _disk(value: str) -> None:
    check_device_path(value)
    if not re.fullmatch(r"[A-Za-z0-9/._:+@=-]+", value):
        raise ValueError(f"{value!r}: a device path has no spaces, quotes, commas or the like")


def site_name(host: str) -> str:
    """A site's name from its host: the first label of a host name, lower-cased, with what a
    profile name may not hold turned into dashes (`Files-1.acme.example` -> `files-1`); an
    address's dots become dashes (`198.51.100.20` -> `198-51-100-20`)."""
    first = host if re.fullmatch(r"[0-9.]+|.*:.*", host) else host.split(".", 1)[0]
    name = re.sub(r"[^a-z0-9]+", "-", first.lower()).strip("-")
    return name[:32].rstrip("-") or "site"


def starter_text(answers: Starter) -> str:
    """The profile's YAML text."""
    primary, dr = site_name(answers.primary_host), site_name(answers.dr_host)
    if primary == dr:  # two hosts named alike in different domains: tell them apart
        primary, dr = f"{primary}-a", f"{dr}-b"
    replication = (
        "{mode: async, write_behind: 4096}"  # writes wait for the local disk only (docs/failover.md)
        if answers.mode == "async"
        else "{mode: sync}"
    )
    ssh = f"ssh: {{identity_file: {SITE_KEY}, known_hosts: {KNOWN_HOSTS}}}"
    portal = _portal(answers.dr_address or answers.dr_host)
    return f"""\
# Written by `remirror init`. The same file goes to both hosts, as
# /etc/remirror/{answers.name}.yaml: each finds its own site in it by its host name
# (`uname -n`, the site's name or its ssh:// host), or by the one word in
# /etc/remirror/site. Reference: docs/profile.md.
version: 1
name: {answers.name}

sites:
  {primary}: {{host: {json.dumps(f"ssh://root@{_bracketed(answers.primary_host)}")}, {ssh}}}
  {dr}: {{host: {json.dumps(f"ssh://root@{_bracketed(answers.dr_host)}")}, {ssh}}}

mirrors:
  - name: {answers.name}
    device: /dev/md/{answers.name}
    primary: {{site: {primary}, disk: {json.dumps(answers.primary_disk)}}}
    replicas:
      - {{site: {dr}, disk: {json.dumps(answers.dr_disk)}, portal: {json.dumps(portal)}}}
    replication: {replication}
"""


def starter_profile(answers: Starter, source: str = "<init>") -> Profile:
    """The profile `init` would write, loaded and checked as any profile is; ValueError naming
    the option when an answer is wrong."""
    problems = check_answers(answers)
    if problems:
        option, why = next(iter(problems.items()))
        raise ValueError(f"{option}: {why}")
    return parse_profile(starter_text(answers), source)


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _portal(host: str) -> str:
    return f"{_bracketed(host)}:{ISCSI_PORT}"
