"""A site's scope kept compiled, so that its agent starts without the profile models.

Every remote command starts an agent at each site it reaches, and the agent holds every
request to the site's scope (remirror.agent.policy), which the site's own profiles give.
Reading them builds the profile models (pydantic, ruamel): under emulation, or on a small
DR host, that costs twice the agent's own start. So a site keeps the scope it built in
CACHE, beside a key of everything it was built from: the text of each profile and of the
site file, the host name, and remirror's own code. An agent whose key matches reads the
scope from there (remirror.facts.scope); at any other key it reads the profiles and writes
the file again.

Trust: the file is this site's own, written by root into a directory only root may write
(/run: a boot starts afresh). A file or directory another user owns or may write is never
read, nor written into. The key hashes the profiles' text, not their times (a profile
rewritten within one tick of the clock is still told apart), and the text hashed is the
text parsed (remirror.agent.policy.load_scope), so a scope is never filed under a key it
was not built from.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import remirror
from remirror.facts.scope import SCOPE_FORMAT, scope_from_text, scope_to_text
from remirror.files import make_dirs, only_ours, write_atomically

if TYPE_CHECKING:
    from remirror.facts.scope import SiteScope

CACHE = Path("/run/remirror/scope.json")


def read_texts(files: list[Path]) -> dict[Path, str | None]:
    """Each profile's text, read once as remirror.profile.loader reads it (UTF-8, newlines
    made one): None for one that cannot be read, whose own load then says why."""
    texts: dict[Path, str | None] = {}
    for file in files:
        try:
            texts[file] = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            texts[file] = None
    return texts


def scope_key(texts: dict[Path, str | None], site_file: Path) -> str | None:
    """What a scope is built from, hashed; None when a profile or the site file cannot be read,
    or when remirror's code changed on disk since this process loaded it (an upgrade under way)."""
    if any(text is None for text in texts.values()):
        return None
    try:
        site = site_file.read_bytes().hex() if site_file.exists() else None
        code = _code()
    except OSError:
        return None
    # A tick of the kernel's clock (its file times are coarse) early: a module changed in the
    # tick this process loaded remirror may not be the code it runs.
    if max(changed for _, _, _, changed in code) > remirror.LOADED_NS - 20_000_000:
        return None
    parts: list[object] = [SCOPE_FORMAT, remirror.__version__, os.uname().nodename, code, site]
    parts += [[file.name, hashlib.sha256((text or "").encode()).hexdigest()] for file, text in texts.items()]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def read(key: str, cache: Path = CACHE) -> SiteScope | None:
    """The scope filed under `key`; None if there is none, another key, or a file not trusted."""
    try:
        if not _trusted(cache.parent, stat.S_ISDIR):
            return None
        fd = os.open(cache, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd) as handle:
        if not _trusted_stat(os.fstat(handle.fileno()), stat.S_ISREG):
            return None
        try:
            filed_key, _, text = handle.read().partition("\n")
            return scope_from_text(text) if filed_key == key else None
        except Exception:  # noqa: BLE001 - not one this code wrote: the profiles are read instead
            return None


def write(key: str, scope: SiteScope, cache: Path = CACHE) -> None:
    """File `scope` under `key` (mode 0600); a site that cannot only pays for its profiles again.
    `key` is what the caller took before it read the profiles: one that no longer holds (the
    site file or the code changed while it built the scope) files nothing."""
    with contextlib.suppress(Exception):  # a cache, never a reason to refuse a request
        make_dirs(cache.parent, 0o755)  # /run/remirror: the file itself is 0600
        if _trusted(cache.parent, stat.S_ISDIR):
            write_atomically(cache, f"{key}\n{scope_to_text(scope)}", mode=0o600)


def _code() -> list[tuple[str, int, int, int]]:
    """remirror's own code as installed: each module's path, size, inode and change time (which
    no tool sets back, as dpkg, `cp -p` or a store's fixed times set the modification time);
    another version of the code may build another scope from the same profiles."""
    package = Path(remirror.__file__).parent
    found = []
    for module in package.rglob("*.py"):
        seen = module.stat()
        found.append((str(module.relative_to(package)), seen.st_size, seen.st_ino, seen.st_ctime_ns))
    return sorted(found)


def _trusted(path: Path, kind: Callable[[int], bool]) -> bool:
    try:
        return _trusted_stat(path.lstat(), kind)
    except OSError:
        return False


def _trusted_stat(seen: os.stat_result, kind: Callable[[int], bool]) -> bool:
    """Of the right kind, and root's (this process's user's) alone to write."""
    return kind(seen.st_mode) and only_ours(seen)
