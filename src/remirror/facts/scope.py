"""What a site's own profiles let another site name there, and its compiled form. Pure.

remirror.profile.scope builds a SiteScope from the profiles a site holds; the
agent (remirror.agent.policy) holds every request from another site to it. The
types live here, below the profile models, so that a site can keep its scope
compiled (`scope_to_text`, remirror.agent.compiled_scope) and its agent read it
back (`scope_from_text`) without loading pydantic and ruamel: under emulation,
or on a small DR host, building the profile models costs twice the agent's own
start, and every remote command starts an agent.

The compiled form is JSON read back strictly, field by field against the
types below: anything else in it (a field missing or unknown, a list where a
pair belongs) is an error, and the site reads its profiles instead.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

from remirror.retention import Keep

# The compiled form's version: a site that finds another reads its profiles again.
SCOPE_FORMAT = 1


@dataclass(frozen=True)
class SiteScope:
    """The names a site's profiles give for itself; `sources`: the profile files, for messages."""

    sources: tuple[str, ...] = ()
    mirrors: frozenset[str] = frozenset()
    disks: frozenset[str] = frozenset()  # leg and cache disks on the site, as the profiles write them
    # The site's own points (points_key, disk): their disk is read (observe), never written, and
    # their stack only built or activated, by a step that names exactly them.
    points: frozenset[tuple[str, str]] = frozenset()
    arrays: frozenset[str] = frozenset()  # /dev/md/NAME of every mirror with a leg on the site
    # Each mirror's array as its profiles make it: (/dev/md/NAME, UUID) (an md create names both).
    array_ids: Mapping[str, frozenset[tuple[str, str]]] = field(default_factory=dict)
    iqns: frozenset[str] = frozenset()  # targets the site exports or logs in to
    portals: frozenset[tuple[str, int]] = frozenset()  # where those targets listen
    # Each leg's target, where it listens: the portals of its node records, never another's.
    node_portals: Mapping[str, frozenset[tuple[str, int]]] = field(default_factory=dict)
    interfaces: frozenset[str] = frozenset()  # remirror's WireGuard interfaces
    sites: frozenset[str] = frozenset()  # the site's own names in the profiles
    known_sites: frozenset[str] = frozenset()  # every site its profiles name (a leg record's primary)
    # A mirror's CDP retention here, (every in seconds, keep): what a `cdp point` from another
    # site is carried out with, whatever it says (a `keep: 0` would prune the history).
    retention: Mapping[str, tuple[float, Keep]] = field(default_factory=dict)
    # This site's end of each WireGuard tunnel, exactly as its profiles make it: interface ->
    # {(address/prefix, port, keepalive, {(peer's tunnel address, its endpoint or None)})}.
    tunnels: Mapping[str, frozenset[Tunnel]] = field(default_factory=dict)
    # The targets the site serves (a replica leg's, its primary leg's after a promotion, an
    # export's), each as its profiles make it; backstore name -> the devices it may serve.
    targets: Mapping[str, TargetScope] = field(default_factory=dict)
    backstores: Mapping[str, frozenset[str]] = field(default_factory=dict)
    # The CHAP the site's initiator logs in to each replica target with (its profiles' forms).
    logins: Mapping[str, frozenset[ChapNames]] = field(default_factory=dict)
    # The node record settings its profiles make for each of those targets, (key, value) but the
    # CHAP user names (`logins`) and passwords: a timeout, a queue, `node.startup` manual, CHAP on.
    node_settings: Mapping[str, frozenset[tuple[str, str]]] = field(default_factory=dict)
    # Each mirror's leg here, the devices that may carry its leg record (its disk, cache device,
    # the volume over its points), and the mirrors whose home primary is here: whether a mirror
    # runs here is read from the leg's own record, and from the profile until it has one.
    leg_devices: Mapping[str, frozenset[str]] = field(default_factory=dict)
    home_primaries: frozenset[str] = frozenset()
    # A seeded mirror whose primary is here: what its catch-up may copy from and onto, (the
    # primary's leg device, a replica's iSCSI disk as this site logs in to it): never the other way.
    seed_copies: Mapping[str, frozenset[tuple[str, str]]] = field(default_factory=dict)
    # The legs here of seeded mirrors, which a catch-up reads from their byte 0 (`digest` raw).
    seed_legs: frozenset[str] = frozenset()


# (address/prefix, UDP port, keepalive, the peers' (tunnel address, endpoint)): see SiteScope.tunnels.
Tunnel = tuple[str, int, int, frozenset[tuple[str, str | None]]]
# A target's CHAP as its ACLs carry it: (username, the target's mutual username or ""); None: none.
ChapNames = tuple[str, str] | None


@dataclass(frozen=True)
class TargetScope:
    """What the site's profiles make of one LIO target there, so that nothing another site
    asks for widens it: its CHAP (dropped, another user, mutual off), its portals (a WireGuard
    mirror's target on the plain network), its LUN's backstores, the initiators of its ACLs
    (None: the primary's, which no profile names: any one initiator name)."""

    chap: frozenset[ChapNames] = frozenset()
    portals: frozenset[tuple[str, int]] = frozenset()
    backstores: frozenset[str] = frozenset()
    initiators: frozenset[str] | None = None
    # Where the profiles keep a CHAP secret of its ACLs: (user, "password" | "mutual_password",
    # file), for the secrets a profile names (`password_file`), which the site may hold too; not
    # the ones remirror generates, which only the controller that made them holds.
    secret_files: frozenset[tuple[str, str, str]] = frozenset()

    def merged(self, other: TargetScope) -> TargetScope:
        """Two profiles naming one target: either's form."""
        initiators = (
            None
            if self.initiators is None or other.initiators is None
            else self.initiators | other.initiators
        )
        return TargetScope(
            self.chap | other.chap,
            self.portals | other.portals,
            self.backstores | other.backstores,
            initiators,
            self.secret_files | other.secret_files,
        )


def scope_to_text(scope: SiteScope) -> str:
    """The compiled form: JSON, sets sorted, so that one scope always reads the same."""
    return json.dumps({"format": SCOPE_FORMAT, "scope": _plain(scope)}, sort_keys=True)


def scope_from_text(text: str) -> SiteScope:
    """A compiled scope read back; ValueError for anything that is not one, field by field."""
    document = json.loads(text)
    if (
        not isinstance(document, dict)
        or document.get("format") != SCOPE_FORMAT
        or set(document)
        != {
            "format",
            "scope",
        }
    ):
        raise ValueError("not a compiled scope of this format")
    scope = _typed(SiteScope, document["scope"], "scope")
    return typing.cast(SiteScope, scope)


def _plain(value: Any) -> Any:
    """JSON's form of a scope's value: a dataclass an object, a set a sorted list, a pair a list."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, (set, frozenset)):
        return sorted((_plain(item) for item in value), key=lambda item: json.dumps(item, sort_keys=True))
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {_key(key): _plain(item) for key, item in value.items()}
    if value is None or isinstance(value, (str, int, float)):
        return value
    raise TypeError(f"a scope holds no {type(value).__name__}")


def _key(key: object) -> str:
    if not isinstance(key, str):
        raise TypeError("a scope's mappings are keyed by names")
    return key


def _typed(kind: Any, value: Any, where: str) -> Any:
    """`value` read as `kind` (an annotation of the types above); ValueError naming `where`."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if isinstance(kind, type) and is_dataclass(kind):
        hints = typing.get_type_hints(kind)
        names = [f.name for f in fields(kind)]
        if not isinstance(value, dict) or set(value) != set(names):
            raise ValueError(f"{where}: not the fields of {kind.__name__}")
        return kind(**{name: _typed(hints[name], value[name], f"{where}.{name}") for name in names})
    if origin in (typing.Union, types.UnionType):
        (other,) = [arg for arg in args if arg is not type(None)]  # every optional here is X | None
        return None if value is None else _typed(other, value, where)
    if origin is frozenset:
        items = [_typed(args[0], item, f"{where}[]") for item in _list(value, where)]
        return frozenset(items)
    if origin is tuple:
        items = _list(value, where)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_typed(args[0], item, f"{where}[]") for item in items)
        if len(items) != len(args):
            raise ValueError(f"{where}: {len(items)} items where {len(args)} belong")
        return tuple(_typed(arg, item, f"{where}[]") for arg, item in zip(args, items, strict=True))
    if origin is Mapping:
        if not isinstance(value, dict):
            raise ValueError(f"{where}: not a mapping")
        return {
            _typed(args[0], key, where): _typed(args[1], item, f"{where}.{key}")
            for key, item in value.items()
        }
    if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if kind in (str, int) and isinstance(value, kind) and not isinstance(value, bool):
        return value
    raise ValueError(f"{where}: not a {getattr(kind, '__name__', kind)}")


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"{where}: not a list")
    return value
