"""Health: what state each mirror is in, from the sites' facts. Pure: no I/O."""

from remirror.health.state import LegHealth, MirrorHealth, State, assess

__all__ = ["LegHealth", "MirrorHealth", "State", "assess"]
