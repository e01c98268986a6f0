"""Shared test helpers."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROFILES = REPO / "profiles"
