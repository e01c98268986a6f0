"""This host, as remirror finds itself in a profile (remirror.profile.identity says how).

Every command and daemon loads its profiles through `load_profile_here`, and a site's agent
its scope through `this_host(environment=False)` (remirror.agent.policy), so one file copied
unchanged to every site means the same thing everywhere, each host taking its own part.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from remirror.errors import RemirrorError, UsageError
from remirror.files import state_dir, write_atomically
from remirror.profile.identity import SITE_FILE, Here, as_seen_here
from remirror.profile.loader import load_profile, parse_profile, read_profile_text
from remirror.profile.model import Profile

log = logging.getLogger("remirror.here")
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


def profile_here(text: str, source: str) -> Profile:
    """A profile's text parsed and checked (`source` names it in messages), as seen here."""
    return as_seen_here(parse_profile(text, source), this_host())


def applied_record(name: str) -> Path:
    """Where `apply` keeps the text it last applied on this host, for the profile named `name`."""
    return state_dir() / "applied" / f"{name}.yaml"


_FROM = "# applied from: "  # the record's first line: the file the text was applied from


def record_applied(profile: Profile, text: str, path: str | Path) -> None:
    """Keep `text`, read from `path`, which a verb is about to apply here (the operator has said
    yes; nothing has changed yet), for the daemons that run the profile on this host
    (RunningProfile). Written while the verb holds the sites' locks, whole or not at all (a
    temporary file renamed), for root only. A record that cannot be written stops the verb
    before it changes anything: a watch would otherwise undo what it did."""
    record = applied_record(profile.name)
    try:
        record.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_atomically(record, f"{_FROM}{json.dumps(str(Path(path).resolve()))}\n{text}", mode=0o600)
    except OSError as error:
        raise RemirrorError(
            f"cannot keep the text being applied in {record} ({error.strerror or error}): nothing changed"
        ) from None


def _recorded(record: Path) -> tuple[str, str]:
    """The file a record's text was applied from, and the text."""
    first, _, text = read_profile_text(record).partition("\n")
    if not first.startswith(_FROM):
        raise UsageError(f"{record}: not a record of remirror's (its first line names no file)")
    return str(json.loads(first[len(_FROM) :])), text


Built = TypeVar("Built")


class RunningProfile:
    """The profile a daemon runs on: its file as it was when the daemon started, then each text
    a verb applied from that file on this host since (applied_record).

    Not the file as edited: a change is carried out by `apply`, after its plan and the
    operator's yes, never by a daemon that happened to read the file (a watch would log out of
    a replica for a new timeout nobody applied). And not the start's text once an apply changed
    the mirror: a watch would undo the change at its next pass, as a "repair" (write-behind
    put back after an apply made the mirror asynchronous). A site where nobody runs `apply`
    (a DR site's own points) takes a changed profile when its daemon restarts; so does a
    primary whose profile was applied from another host.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).resolve()
        text = read_profile_text(path)
        self.profile = profile_here(text, str(path))  # bad text at the start: the daemon does not start
        self.record = applied_record(self.profile.name)
        self._seen = _stamp(self.record)
        try:
            source, applied = _recorded(self.record) if self._seen else ("", text)
        except RemirrorError:
            source, applied = "", text
        if source == str(self.path) and applied != text:
            log.warning(
                "%s differs from what apply last applied here (%s): running the file; apply it, or put"
                " the applied text back",
                path,
                self.record,
            )

    def changed(self) -> bool:
        """Whether an apply has recorded a text since the daemon last took one (or tried to)."""
        return _stamp(self.record) != self._seen

    def follow(self, build: Callable[[Profile], Built], current: Built, emit: Callable[[str], None]) -> Built:
        """`current`, or what `build` makes of the text an apply of this file recorded since.

        A text that cannot be taken (applied from another file naming the same profile, a
        CHAP file since removed, a cdp daemon's mirror without `cdp` any more) is said in one
        JSON line through `emit`, and `current` stays until the next apply.
        """
        stamp = _stamp(self.record)
        if stamp == self._seen:
            return current
        self._seen = stamp
        try:
            source, text = _recorded(self.record)
            if source != str(self.path):
                raise UsageError(
                    f"{self.record}: applied from {source}, not {self.path}, which this daemon runs"
                    f" (two files name profile {self.profile.name})"
                )
            profile = profile_here(text, f"{self.record} (from {source})")
            built = build(profile)
        except Exception as error:  # noqa: BLE001 - whatever it is, the daemon goes on as it was
            said = (
                error.one_line() if isinstance(error, RemirrorError) else f"{type(error).__name__}: {error}"
            )
            kept = "the profile as it ran before, until the next apply"
            emit(json.dumps({"event": "profile", "error": said, "kept": kept}))
            return current
        self.profile = profile
        emit(json.dumps({"event": "profile", "loaded": str(self.record)}))
        return built


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """Which version of a record is there (apply renames a new file over it each time); None
    when there is none, or it cannot be looked at (then nothing new is taken)."""
    try:
        status = path.stat()
    except OSError:
        return None
    return (status.st_ino, status.st_mtime_ns, status.st_size)
