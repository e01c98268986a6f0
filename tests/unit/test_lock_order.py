"""The order a controller takes the sites' locks in (Controller._lock_in_order): the same at
every controller, so that two starting at once (both sites booting) never deadlock."""

from __future__ import annotations

from typing import Any

from remirror.controller import Controller
from remirror.errors import SiteUnreachable
from remirror.profile import parse_profile
from tests.unit.test_failover import PROFILE_TEXT

# The sites declared out of the order of their names: c, a, b.
SITES = "  a: {host: local}\n  b: {host: ssh://root@b}\n  c: {host: ssh://root@c}\n"
assert SITES in PROFILE_TEXT
PROFILE = parse_profile(
    PROFILE_TEXT.replace(SITES, "  c: {host: ssh://root@c}\n  a: {host: local}\n  b: {host: ssh://root@b}\n")
)


class Client:
    def __init__(self, name: str, taken: list[str], unreachable: bool = False) -> None:
        self.name, self.taken, self.unreachable = name, taken, unreachable

    def lock(self, name: str, holder: str, wait: float) -> None:
        if self.unreachable:
            raise SiteUnreachable(self.name, "cannot be reached")
        self.taken.append(self.name)


def controller_of(taken: list[str], unreachable: str = "") -> Controller:
    controller = Controller(PROFILE, lock="start")
    clients: dict[str, Any] = {name: Client(name, taken, name == unreachable) for name in PROFILE.sites}
    controller.clients = clients
    return controller


def test_every_controller_takes_the_locks_in_the_order_of_the_sites_names_one_by_one() -> None:
    taken: list[str] = []
    assert list(PROFILE.sites) == ["c", "a", "b"]
    assert controller_of(taken)._lock_in_order() == {}
    assert taken == ["a", "b", "c"]


def test_a_site_that_cannot_be_reached_is_named_and_the_others_are_locked() -> None:
    taken: list[str] = []
    cut_off = controller_of(taken, unreachable="b")._lock_in_order()
    assert list(cut_off) == ["b"]
    assert taken == ["a", "c"]
