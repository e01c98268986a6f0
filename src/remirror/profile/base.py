"""The base of every profile model: frozen, no unknown keys, no control characters."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator


class ProfileModel(BaseModel):
    """Immutable; a typo in a key is an error, never a default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @field_validator("*", mode="after")
    @classmethod
    def _no_control_characters(cls, value: Any) -> Any:
        """Names and paths end up in mdadm.conf, node records and LIO's saved config, one per
        line: a newline in one (`device: "/dev/md/x\\nARRAY ..."`) would write a line of its own."""
        for text in _strings(value):
            bad = next((c for c in text if ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0), None)
            if bad is not None:
                raise ValueError(f"{text!r} holds a control character ({bad!r}): not allowed in a profile")
        return value


def _strings(value: Any) -> list[str]:
    """Every string in a field's value: itself, or in its lists and mappings (keys too); a
    nested model checks its own fields."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []
