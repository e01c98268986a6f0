"""The Ansible role's filter that gives each site its own view of the profile
(playbooks/roles/remirror/filter_plugins/remirror_site_view.py): itself local, the primary over
SSH with the deployed keys, names unchanged. The lab test (tests/lab/test_ansible.py) reads the
views the role wrote on both sites; the contract's profile, seen from its DR site, validates."""

from __future__ import annotations

import importlib.util
import io
import sys
from pathlib import Path
from typing import Any

import pytest
from ansible.errors import AnsibleFilterError
from ruamel.yaml import YAML

from remirror.profile.loader import parse_profile
from tests.unit.test_profile import contract_as_landed

ROLE = Path(__file__).parents[2] / "playbooks/roles/remirror"
CONTRACT = Path(__file__).parents[3] / "shared/contract/two-site.yaml"

_spec = importlib.util.spec_from_file_location(
    "remirror_site_view", ROLE / "filter_plugins/remirror_site_view.py"
)
assert _spec is not None
assert _spec.loader is not None
view_module = importlib.util.module_from_spec(_spec)
sys.modules["remirror_site_view"] = view_module
_spec.loader.exec_module(view_module)
site_view = view_module.site_view

KEYS = {"identity_file": "/etc/remirror/id_ed25519", "known_hosts": "/etc/remirror/known_hosts"}
PROFILE: dict[str, Any] = {
    "version": 1,
    "name": "acme",
    "sites": {
        "hq": {"host": "local"},
        "dr": {"host": "ssh://root@dr.acme.example:22", "ssh": KEYS},
        "dr2": {"host": "ssh://root@dr2.acme.example", "ssh": KEYS},
    },
    "mirrors": [{"name": "finance"}],
}


def test_the_dr_site_sees_itself_local_and_the_primary_over_ssh_with_the_same_keys() -> None:
    view = site_view(PROFILE, "dr", hostvars={"hq": {"ansible_host": "hq.acme.example"}})
    assert view["sites"] == {
        "hq": {"host": "ssh://root@hq.acme.example", "ssh": KEYS},
        "dr": {"host": "local"},
        "dr2": PROFILE["sites"]["dr2"],  # a third site keeps its entry
    }
    assert view["mirrors"] == PROFILE["mirrors"]
    assert view["name"] == "acme"
    assert PROFILE["sites"]["hq"] == {"host": "local"}  # the group_vars mapping is not changed


def test_the_primary_sees_the_profile_as_written() -> None:
    assert site_view(PROFILE, "hq") == PROFILE


def test_the_primarys_address_comes_from_the_addresses_then_the_inventory_then_its_name() -> None:
    hostvars = {"hq": {"ansible_host": "10.0.0.1"}}
    given = {"hq": "admin@hq.vpn:2222"}
    assert site_view(PROFILE, "dr", given, hostvars)["sites"]["hq"]["host"] == "ssh://admin@hq.vpn:2222"
    assert site_view(PROFILE, "dr", {"hq": "ssh://r@h:1"})["sites"]["hq"]["host"] == "ssh://r@h:1"
    assert site_view(PROFILE, "dr", {}, hostvars)["sites"]["hq"]["host"] == "ssh://root@10.0.0.1"
    assert site_view(PROFILE, "dr")["sites"]["hq"]["host"] == "ssh://root@hq"


def test_a_host_that_is_no_site_of_the_profile_is_named() -> None:
    with pytest.raises(
        AnsibleFilterError, match=r"remirror_site 'web1' is not a site of the profile \(dr, dr2, hq\)"
    ):
        site_view(PROFILE, "web1")


def test_the_contracts_profile_seen_from_its_dr_site_is_a_valid_profile() -> None:
    data = YAML(typ="safe").load(contract_as_landed(CONTRACT.read_text()))
    view = site_view(data, "dr", {"hq": "hq.acme.example"})
    assert view["sites"]["hq"]["host"] == "ssh://root@hq.acme.example"
    stream = io.StringIO()
    YAML(typ="safe").dump(view, stream)
    profile = parse_profile(stream.getvalue(), "dr-view.yaml")
    assert profile.sites["dr"].is_local
    assert not profile.sites["hq"].is_local


def test_the_sites_that_keep_their_own_points_are_found_for_the_cdp_service() -> None:
    profile = {
        "mirrors": [
            {
                "name": "m0",
                "replicas": [{"site": "dr", "disk": "/dev/sdb", "points": {"every": "1h", "keep": "7d"}}],
            },
            {"name": "m1", "replicas": [{"site": "dr", "disk": "/dev/sdc"}]},
        ]
    }
    assert view_module.points_mirrors(profile, "dr") == ["m0"]
    assert view_module.points_mirrors(profile, "office") == []
