"""The Ansible role's filters (the collection remirror.remirror: plugins/filter/remirror_profile.py):
which of a site's units the role enables, read from the one profile every site gets."""

from __future__ import annotations

import importlib.util
import io
import sys
from pathlib import Path

COLLECTION = Path(__file__).parents[2] / "playbooks/collections/ansible_collections/remirror/remirror"

_spec = importlib.util.spec_from_file_location(
    "remirror_profile", COLLECTION / "plugins/filter/remirror_profile.py"
)
assert _spec is not None
assert _spec.loader is not None
filters = importlib.util.module_from_spec(_spec)
sys.modules["remirror_profile"] = filters
_spec.loader.exec_module(filters)

PROFILE = {
    "mirrors": [
        {
            "name": "m0",
            "replicas": [{"site": "dr", "disk": "/dev/sdb", "points": {"every": "1h", "keep": "7d"}}],
        },
        {"name": "m1", "replicas": [{"site": "dr", "disk": "/dev/sdc", "drill": {"every": "7d"}}]},
    ]
}


def test_the_sites_that_keep_their_own_points_are_found_for_the_cdp_service() -> None:
    assert filters.points_mirrors(PROFILE, "dr") == ["m0"]
    assert filters.points_mirrors(PROFILE, "office") == []


def test_the_sites_that_drill_their_replica_are_found_for_the_drill_timer() -> None:
    assert filters.drill_mirrors(PROFILE, "dr") == ["m1"]
    assert filters.drill_mirrors(PROFILE, "office") == []


def test_the_role_has_no_filter_that_rewrites_the_profile_for_a_site() -> None:
    # Every site holds the same file; a site's own copy made by rewriting it is gone.
    assert set(filters.FilterModule().filters()) == {"points_mirrors", "drill_mirrors", "verify_mirrors"}


def test_the_primary_sites_are_found_for_the_verify_timer() -> None:
    profile = {**PROFILE, "mirrors": [{**m, "primary": {"site": "office"}} for m in PROFILE["mirrors"]]}
    assert filters.verify_mirrors(profile, "office") == ["m0", "m1"]
    assert filters.verify_mirrors(profile, "dr") == []


def test_the_example_inventorys_profile_is_one_file_each_of_its_hosts_finds_itself_in() -> None:
    from ruamel.yaml import YAML

    from remirror.profile import parse_profile
    from remirror.profile.identity import Here, site_here

    example = Path(__file__).parents[2] / "playbooks/inventory.example"
    hosts = YAML(typ="safe").load((example / "hosts.yml").read_text())
    group_vars = YAML(typ="safe").load((example / "group_vars/all/remirror.yml").read_text())
    stream = io.StringIO()
    YAML(typ="safe").dump(group_vars["remirror_profile"], stream)
    profile = parse_profile(stream.getvalue(), "remirror_profile")
    assert not [name for name, site in profile.sites.items() if site.is_local]  # no site's own copy
    names = [name for group in hosts.values() for name in group["hosts"]]
    for name in names:  # the role's /etc/remirror/site: the inventory name
        assert site_here(profile, Here(site_file=name)) == name
    for name, host in ((n, h) for group in hosts.values() for n, h in group["hosts"].items()):
        assert site_here(profile, Here(hostname=host["ansible_host"])) == name
