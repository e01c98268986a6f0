"""This host, as remirror finds itself in a profile (remirror.profile.identity says how).

Every command and daemon loads its profiles through `load_profile_here`, and a site's agent
its scope through `this_host(environment=False)` (remirror.agent.policy), so one file copied
unchanged to every site means the same thing everywhere, each host taking its own part.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from remirror.errors import RemirrorError, UsageError
from remirror.profile.identity import SITE_FILE, Here, as_seen_here
from remirror.profile.loader import load_profile
from remirror.profile.model import Profile

SITE_VARIABLE = "REMIRROR_SITE"  # `remirror --site NAME` sets it for the verb and what it starts


def this_host(*, environment: bool = True, site_file: Path = Path(SITE_FILE)) -> Here:
    """The site this host was told it is (REMIRROR_SITE unless `environment` is False, then the
    site file) and its host name."""
    named = (os.environ.get(SITE_VARIABLE) or None) if environment else None
    try:
        text = site_file.read_text(encoding="utf-8")
    except FileNotFoundError:
        in_file = None
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"{site_file}: cannot read this host's site name: {error}") from None
    else:
        words = text.split()
        if len(words) != 1:
            raise UsageError(f"{site_file}: holds {len(words)} words; it names this host's site, one word")
        in_file = words[0]
    return Here(
        named=named, named_by=f"--site ({SITE_VARIABLE})", site_file=in_file, hostname=os.uname().nodename
    )


def load_profile_here(path: str | Path) -> Profile:
    """Read, parse and check a profile, with the site this host is made `host: local`."""
    return as_seen_here(load_profile(path), this_host())


Built = TypeVar("Built")


class ProfileFile:
    """The profile a daemon runs on, and whether what it was loaded from has changed since.

    A daemon loads its profile when it starts, and runs for months. An operator who changes
    the file and applies it must not find the daemon working toward the old text: `remirror
    watch` would undo the change at its next pass (a write-behind or a leg's setting put back
    as a "repair"). So the daemons look at the file, this host's site file and its name
    before each round, and load the profile again when any of them changed. Text that no
    longer loads (an edit half done) leaves the daemon on the profile it had, which is what
    the sites still run, and it says so once: `apply` would refuse that text too.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._seen = self._fingerprint()
        self.profile = load_profile_here(self.path)  # bad text at the start: the daemon does not start

    def _fingerprint(self) -> bytes:
        digest = hashlib.sha256()
        for source in (self.path, Path(SITE_FILE)):
            try:
                digest.update(source.read_bytes())
            except OSError as error:  # gone or unreadable: a change too, which the load reports
                digest.update(f"<{type(error).__name__}>".encode())
            digest.update(b"\0")
        digest.update(os.uname().nodename.encode())
        return digest.digest()

    def changed(self) -> bool:
        """Whether the file, the site file or the host name differ from when last loaded or tried."""
        return self._fingerprint() != self._seen

    def follow(self, build: Callable[[Profile], Built], current: Built, emit: Callable[[str], None]) -> Built:
        """`current`, or what `build` makes of the profile loaded again if its sources changed.

        A change is taken once: text that does not load, or that `build` refuses, is said
        in one JSON line through `emit`, and `current` stays until the next change.
        """
        fingerprint = self._fingerprint()
        if fingerprint == self._seen:
            return current
        self._seen = fingerprint
        try:
            profile = load_profile_here(self.path)
            built = build(profile)
        except RemirrorError as error:
            kept = "the profile as loaded before, which is what the sites run (apply refuses this text too)"
            emit(json.dumps({"event": "profile", "error": error.one_line(), "kept": kept}))
            return current
        self.profile = profile
        emit(json.dumps({"event": "profile", "loaded": str(self.path)}))
        return built
