"""A step on the wire: typed fields to a JSON object and back, strictly. Pure.

`Step.as_dict` is the only place a step becomes a dict (a field left at its
default is left out: the decoder fills in the same default). `from_wire`
reads a JSON object back into a step's class and refuses, with one line,
whatever the class does not say: a key it has no field for, a field left out
that has no default, a value of another type (a bool is not a number, a
string is not a list, a number is not a string). What reaches a field is then
of the field's type, and the agent's checks and handlers read fields, never
the sender's dictionary.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

# A JSON document a controller sends is small; a list or text past these is not one of ours.
MAX_ITEMS = 4096
MAX_TEXT = 1 << 20
MAX_NUMBER = 1 << 63  # no count, size or offset of a disk's is larger
MAX_REAL = 1 << 53


class WireError(ValueError):
    """A JSON object that is not a step of the catalogue; the message says what, in one line."""


class Step:
    """One thing the agent does on a site; `kind` names it on the wire."""

    kind: ClassVar[str]

    def as_dict(self) -> dict[str, Any]:
        """The JSON object the agent reads (the only place a step becomes a dict)."""
        values = {
            f.name: plain(getattr(self, f.name))
            for f in dataclasses.fields(self)  # type: ignore[arg-type]
            if not _is_default(f, getattr(self, f.name))
        }
        return {"kind": self.kind, **values}


T = TypeVar("T")


def _is_default(f: dataclasses.Field[Any], value: Any) -> bool:
    if f.default is not dataclasses.MISSING:
        return bool(value == f.default)
    if f.default_factory is not dataclasses.MISSING:
        return bool(value == f.default_factory())
    return False


def plain(value: Any) -> Any:
    """`value` as JSON holds it: dataclasses as objects, tuples as lists, mapping keys as text."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    return value


def from_wire(cls: type[T], obj: Any, what: str = "") -> T:
    """An instance of dataclass `cls` from JSON object `obj`, every field of its declared type."""
    name = what or getattr(cls, "kind", cls.__name__)
    if not isinstance(obj, Mapping):
        raise WireError(f"{name}: an object was expected, not {_shown(obj)}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(str(k) for k in obj if k not in fields and k != "kind")
    if unknown:
        raise WireError(f"{name}: {', '.join(unknown)[:80]} is not a field of it")
    values = {}
    for key, f in fields.items():
        if key not in obj:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise WireError(f"{name}: its {key} is missing")
            continue
        values[key] = _typed(hints[key], obj[key], f"{name} {key}")
    return cls(**values)


def _typed(hint: Any, value: Any, where: str) -> Any:
    """`value` as type `hint` (the few types the catalogue's fields have), or WireError."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _typed(inner, value, where)
    if origin is typing.Literal:
        if not any(type(value) is type(choice) and value == choice for choice in args):
            raise WireError(f"{where}: {_shown(value)} is not one of {', '.join(map(str, args))}")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise WireError(f"{where}: {_shown(value)} is not true or false")
        return value
    if hint is int:
        if type(value) is not int or abs(value) > MAX_NUMBER:
            raise WireError(f"{where}: {_shown(value)} is not a whole number")
        return value
    if hint is float:
        # No NaN or infinity, and no number a float cannot hold exactly (past 2**53).
        if type(value) not in (int, float) or not abs(value) <= MAX_REAL:
            raise WireError(f"{where}: {_shown(value)} is not a number")
        return float(value)
    if hint is str:
        if not isinstance(value, str) or len(value) > MAX_TEXT:
            raise WireError(f"{where}: {_shown(value)} is not a text")
        return value
    if origin is tuple:
        if not isinstance(value, list) or len(value) > MAX_ITEMS:
            raise WireError(f"{where}: {_shown(value)} is not a list")
        return tuple(_typed(args[0], item, where) for item in value)
    if origin in (Mapping, dict, typing.Mapping):
        if not isinstance(value, Mapping) or len(value) > MAX_ITEMS:
            raise WireError(f"{where}: {_shown(value)} is not an object")
        key_type, value_type = args
        return {_key(key_type, k, where): _typed(value_type, v, where) for k, v in value.items()}
    if dataclasses.is_dataclass(hint):
        return from_wire(typing.cast(type, hint), value, where)
    raise TypeError(f"{where}: the catalogue has no wire form for {hint!r}")  # a catalogue bug


def _key(hint: Any, key: Any, where: str) -> Any:
    """A mapping's key: JSON's are texts; an exit code's (`explain`) is a number written as one."""
    if hint is int:
        if not (isinstance(key, str) and key.isascii() and key.isdigit() and len(key) <= 9):
            raise WireError(f"{where}: {_shown(key)} is not a number")
        return int(key)
    return _typed(hint, key, where)


def _shown(value: Any) -> str:
    return repr(value)[:40]
