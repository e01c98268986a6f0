"""This host, as remirror finds itself in a profile (remirror.profile.identity says how).

Every command and daemon loads its profiles through `load_profile_here`, and a site's agent
its scope through `this_host(environment=False)` (remirror.agent.policy), so one file copied
unchanged to every site means the same thing everywhere, each host taking its own part.
"""

from __future__ import annotations

import os
from pathlib import Path

from remirror.errors import UsageError
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
