"""`transport: wireguard`: the tunnel's names, its facts as recorded in the lab, and its plan."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from remirror.facts.site import SiteFacts
from remirror.facts.wireguard import WireguardFacts, WireguardInterface, WireguardPeer, parse_wg_dump
from remirror.health import assess
from remirror.plan import PlanError, make_plan
from remirror.plan.cache import with_drain_timeout
from remirror.plan.repair import make_repair
from remirror.profile import cautions, load_profile, parse_profile
from remirror.profile.wireguard import (
    FIRST_PORT,
    PORTS,
    interface_name,
    replica_portal,
    tunnel_address,
    tunnel_ends,
    tunnel_port,
)
from remirror.protocol.steps import WireguardTunnel
from tests.conftest import PROFILES
from tests.unit.simulated_sites import Sites, at_site, wire
from tests.unit.test_plan_properties import SECRETS as PROP_SECRETS
from tests.unit.test_plan_properties import bare_sites, profile_text
from tests.unit.test_planner import SECRETS, fresh

LAB = Path(__file__).parent / "fixtures" / "lab-6.1"
CONTRACT = Path(__file__).resolve().parents[3] / "shared" / "contract" / "two-site.yaml"
TEXT = (PROFILES / "lab.yaml").read_text()
WG = parse_profile(TEXT.replace("    replication:\n", "    transport: wireguard\n    replication:\n", 1))
KEYS = {"site-a": "A" * 43 + "=", "site-b": "B" * 43 + "="}


def test_the_recorded_dump_and_addresses_parse_without_the_private_key() -> None:
    up = parse_wg_dump(
        (LAB / "wg-show-dump.txt").read_text(), (LAB / "ip-address-wireguard.json").read_text(), True
    )
    assert up.public_key == "J8T6+u1iRohX89/z5vzX0/m9L0V5G3HNrXMSorxdSTE="
    assert (up.listen_port, up.addresses, up.up) == (51900, ("169.254.7.1/24",), True)
    peer = up.peers["NX92E6HTxd1Fp8I4GeNst0gyLm6DJ7CozIUq3SrSJT4="]
    assert (peer.endpoint, peer.allowed_ips, peer.latest_handshake, peer.keepalive) == (
        "10.99.0.2:51900",
        ("169.254.7.2/32",),
        0,
        25,
    )


def test_names_derive_from_the_profile_and_differ_between_profiles() -> None:
    text = "\n".join(line for line in CONTRACT.read_text().splitlines() if "(issue 18)" not in line)
    contract = parse_profile(text)
    assert interface_name(contract) == "rmwg-acme"
    assert FIRST_PORT <= tunnel_port(contract) < FIRST_PORT + PORTS
    hq, dr = tunnel_address(contract, "hq"), tunnel_address(contract, "dr")
    assert hq.startswith("169.254.")
    assert (hq.rpartition(".")[2], dr.rpartition(".")[2]) == ("1", "2")  # their places in `sites`
    assert hq.split(".")[2] != "169"  # never next to the clouds' metadata address
    other = parse_profile(text.replace("name: acme", "name: globex"))
    assert (tunnel_address(other, "hq"), tunnel_port(other)) != (hq, tunnel_port(contract))
    long = parse_profile(text.replace("name: acme", "name: acme-finance-eu"))
    assert len(interface_name(long)) == 15  # Linux's limit
    assert interface_name(long).startswith("rmwg-")
    # The contract's finance mirror goes through the tunnel; its mail mirror does not.
    finance, mail = contract.mirrors
    assert str(replica_portal(contract, finance, finance.replicas[0])) == f"{dr}:3260"
    assert str(replica_portal(contract, mail, mail.replicas[0])) == "198.51.100.20:3260"


def test_each_end_has_the_other_as_peer_and_the_replicas_portal_as_endpoint() -> None:
    ends = tunnel_ends(WG)
    a, b = ends["site-a"], ends["site-b"]
    port = tunnel_port(WG)
    assert [(p.site, p.endpoint) for p in a.peers] == [("site-b", f"192.0.2.2:{port}")]
    # The primary gives no portal: site B learns where it is from its handshakes.
    assert [(p.site, p.endpoint) for p in b.peers] == [("site-a", None)]
    assert a.key_file == "/etc/remirror/wireguard/rmwg-lab.key"
    assert not tunnel_ends(load_profile(PROFILES / "lab.yaml"))  # plain: no tunnel


def with_wireguard(
    facts: dict[str, SiteFacts], keys: dict[str, str], **interfaces: WireguardInterface
) -> dict[str, SiteFacts]:
    return {
        name: dataclasses.replace(
            site,
            wireguard=WireguardFacts(
                {"rmwg-lab": keys[name]} if name in keys else {},
                {"rmwg-lab": interfaces[name.replace("-", "_")]}
                if name.replace("-", "_") in interfaces
                else {},
            ),
        )
        for name, site in facts.items()
    }


def as_made(step: WireguardTunnel, public_key: str) -> WireguardInterface:
    """The interface the step makes, as the agent would then observe it."""
    peers = {
        p.public_key: WireguardPeer(
            p.public_key, p.endpoint, (f"{p.address}/32",), 0, 25 if p.endpoint else None
        )
        for p in step.peers
    }
    return WireguardInterface(public_key, step.port, peers, (step.address,), True)


def test_keys_are_made_on_each_site_first_and_the_mirror_waits_for_them() -> None:
    plan = make_plan(WG, with_wireguard(fresh(), {}), SECRETS)
    assert [(a.site, a.verb) for a in plan.actions if a.verb != "WriteMdadmConf"] == [
        ("site-a", "MakeTunnelKey"),
        ("site-b", "MakeTunnelKey"),
    ]
    assert wire(plan.actions[0]) == [
        {"kind": "wireguard_key", "path": "/etc/remirror/wireguard/rmwg-lab.key"}
    ]
    assert "planned once every site has its key" in plan.summary()
    assert with_drain_timeout(plan, 60).pending == plan.pending  # what apply runs keeps it
    # No wg(8) on a site: said before anything is done.
    with pytest.raises(PlanError, match=r"site site-b: transport: wireguard needs wg\(8\) there"):
        make_plan(WG, {**fresh(), "site-a": with_wireguard(fresh(), {})["site-a"]}, SECRETS)


def test_with_the_keys_the_tunnel_comes_first_and_iscsi_goes_through_it() -> None:
    plan = make_plan(WG, with_wireguard(fresh(), KEYS), SECRETS)
    assert not plan.pending
    tunnels = [a for a in plan.actions if a.verb == "SetTunnel"]
    assert [a.site for a in tunnels] == ["site-a", "site-b"]
    assert plan.actions[:2] == tuple(tunnels)
    a_side, b_side = (a.steps[0] for a in tunnels)
    assert isinstance(a_side, WireguardTunnel)
    assert isinstance(b_side, WireguardTunnel)
    address_a, address_b = tunnel_address(WG, "site-a"), tunnel_address(WG, "site-b")
    assert [(p.public_key, p.address) for p in a_side.peers] == [(KEYS["site-b"], address_b)]
    assert [(p.public_key, p.address, p.endpoint) for p in b_side.peers] == [
        (KEYS["site-a"], address_a, None)
    ]
    assert a_side.address == f"{address_a}/24"
    assert a_side.key_file == "/etc/remirror/wireguard/rmwg-lab.key"
    # Site B's target listens on its tunnel address only; site A logs in there.
    steps = [s for a in plan.actions for s in at_site(a)]
    portal = next(s for s in steps if s["kind"] == "lio_create_portal")
    assert (portal["address"], portal["port"]) == (address_b, 3260)
    login = next(s for s in steps if s["kind"] == "run" and "--login" in s["argv"])
    assert login["argv"][login["argv"].index("-p") + 1] == f"{address_b}:3260"
    # Once both ends are as the steps make them, nothing of the tunnel is planned.
    made = with_wireguard(
        fresh(), KEYS, site_a=as_made(a_side, KEYS["site-a"]), site_b=as_made(b_side, KEYS["site-b"])
    )
    assert not [a for a in make_plan(WG, made, SECRETS).actions if a.verb == "SetTunnel"]
    # An interface that went down (or lost its peer) is set up again, as a repair.
    down = dataclasses.replace(as_made(b_side, KEYS["site-b"]), up=False)
    again = make_plan(
        WG, with_wireguard(fresh(), KEYS, site_a=as_made(a_side, KEYS["site-a"]), site_b=down), SECRETS
    )
    assert [(a.site, a.symbol, a.repair) for a in again.actions if a.verb == "SetTunnel"] == [
        ("site-b", "~", True)
    ]


def test_a_public_portal_is_no_caution_once_the_traffic_is_encrypted() -> None:
    public = TEXT.replace("portal: 192.0.2.2:3260", "portal: 203.0.114.7:3260")
    plain = parse_profile(public)
    assert any("public address" in why.message for why in cautions(plain))
    encrypted = parse_profile(
        public.replace("    replication:\n", "    transport: wireguard\n    replication:\n", 1)
    )
    assert not any("public address" in why.message for why in cautions(encrypted))


def test_apply_converges_in_two_rounds_and_the_reconciler_sets_a_lost_tunnel_up_again() -> None:
    text = profile_text("sync", "mutual", 2, False, "wan")
    profile = parse_profile(text.replace("    replication:", "    transport: wireguard\n    replication:", 1))
    sites = Sites(
        {n: dataclasses.replace(f, wireguard=WireguardFacts({}, {})) for n, f in bare_sites().items()}
    )
    first = make_plan(profile, sites.facts, PROP_SECRETS)
    assert first.pending
    assert {a.verb for a in first.actions} <= {"MakeTunnelKey", "WriteMdadmConf"}
    sites.run(first)
    second = make_plan(profile, sites.facts, PROP_SECRETS)  # apply's next round
    assert not second.pending
    assert [a.site for a in second.actions if a.verb == "SetTunnel"] == ["a", "b", "c"]
    sites.run(second)
    assert make_plan(profile, sites.facts, PROP_SECRETS).is_empty
    # Each replica site's end has the primary and the other replica as peers (a promotion of
    # either finds its tunnel there).
    ends = {
        n: {p.endpoint for p in f.wireguard.interfaces["rmwg-prop"].peers.values()}  # type: ignore[union-attr]
        for n, f in sites.facts.items()
    }
    port = tunnel_port(profile)
    assert ends["b"] == {None, f"192.0.2.3:{port}"}  # a has no portal; c's is in the profile
    # Site B restarted: its interface is gone (its key is still on disk).
    wireguard = sites.facts["b"].wireguard
    assert wireguard is not None
    facts = {
        **sites.facts,
        "b": dataclasses.replace(sites.facts["b"], wireguard=WireguardFacts(wireguard.keys, {})),
    }
    mirror = profile.mirrors[0]
    repair = make_repair(profile, mirror, facts, PROP_SECRETS, assess(profile, mirror, facts))
    assert [(a.site, a.verb) for a in repair.actions][:1] == [("b", "SetTunnel")]
    assert not [a for a in repair.actions if a.verb == "MakeTunnelKey"]


def test_each_sites_tunnel_is_inside_its_own_scope_and_nothing_else_is() -> None:
    """Issue 44: a tunnel step is checked field by field against what the site's own profile makes
    (an address of `X/0` would route the DR host's traffic into the tunnel)."""
    from remirror.agent.policy import Refused, check_request
    from remirror.facts.scope import SiteScope
    from remirror.profile.model import Site
    from remirror.profile.scope import site_scope

    text = profile_text("sync", "mutual", 2, False, "wan")
    profile = parse_profile(text.replace("    replication:", "    transport: wireguard\n    replication:", 1))
    sites = Sites(
        {n: dataclasses.replace(f, wireguard=WireguardFacts({}, {})) for n, f in bare_sites().items()}
    )
    sites.run(make_plan(profile, sites.facts, PROP_SECRETS))
    plan = make_plan(profile, sites.facts, PROP_SECRETS)
    tunnels = [(a.site, wire(a)) for a in plan.actions if a.verb == "SetTunnel"]
    assert len(tunnels) == 3

    def scope(site: str) -> SiteScope:
        view = {n: Site(host="local" if n == site else f"ssh://root@{n}") for n in profile.sites}
        return site_scope([("/etc/remirror/prop.yaml", profile.model_copy(update={"sites": view}))])

    for site, steps in tunnels:
        check_request({"op": "run", "steps": steps}, scope(site))  # as planned: inside
        (step,) = steps
        other = next(s for s, _ in tunnels if s != site)
        forged = [
            {**step, "address": "169.254.0.1/0"},
            {**step, "port": step["port"] + 1},
            {**step, "peers": [{**step["peers"][0], "endpoint": "203.0.113.9:51820"}, *step["peers"][1:]]},
            {**step, "peers": [*step["peers"], {**step["peers"][0], "address": "10.0.0.1"}]},
            {**step, "peers": [{**step["peers"][0], "public_key": "x\nPostUp = sh"}]},
        ]
        for request in forged:
            with pytest.raises(Refused):
                check_request({"op": "run", "steps": [request]}, scope(site))
        with pytest.raises(Refused):  # another site's end is not this site's
            check_request({"op": "run", "steps": dict(tunnels)[other]}, scope(site))
