"""Load a profile from YAML, pointing every problem at `file:line:col`.

ruamel.yaml's round-trip loader keeps the position of every key and refuses
duplicate keys (a second `disk:` silently winning would be a data-loss bug).
Positions are kept on the Profile so that later layers (the planner refusing
a disk, apply finding a device missing) can point at the profile line too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from remirror.errors import ProfileError, ProfileProblem
from remirror.profile import rules
from remirror.profile.model import UNION_TAGS, Profile

Positions = dict[tuple[str | int, ...], tuple[int, int]]

# Keys that look like an inline secret get a message saying where secrets go.
_SECRET_KEYS = {"password", "secret", "mutual_password", "chap_password", "key"}


def load_profile(path: str | Path) -> Profile:
    """Read, parse and check a profile file."""
    return parse_profile(read_profile_text(path), str(path))


def read_profile_text(path: str | Path) -> str:
    """A profile file's text; ProfileError naming the file when it cannot be read."""
    source = str(path)
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ProfileError(
            [ProfileProblem(source, 1, 1, "", f"cannot read profile: {error.strerror}")]
        ) from None
    except UnicodeDecodeError:
        raise ProfileError([ProfileProblem(source, 1, 1, "", "not a UTF-8 text file")]) from None


def parse_profile(text: str, source: str = "<profile>") -> Profile:
    """Parse and check profile text; `source` names it in error messages."""
    document = _parse_yaml(text, source)
    positions: Positions = {}
    plain = _to_plain(document, (), positions)
    if not isinstance(plain, dict):
        raise ProfileError(
            [ProfileProblem(source, 1, 1, "", "a profile is a mapping (version, name, sites, mirrors)")]
        )
    try:
        profile = Profile.model_validate(plain)
    except ValidationError as error:
        problems = [_problem_from_pydantic(detail, source, positions) for detail in error.errors()]
        raise ProfileError(_sorted(problems)) from None
    violations = rules.check(profile)
    if violations:
        raise ProfileError(
            _sorted([_problem(source, positions, path, message) for path, message in violations])
        )
    profile._source = source
    profile._positions = positions
    return profile


def _parse_yaml(text: str, source: str) -> Any:
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    try:
        return yaml.load(text)
    except MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        what = " ".join(str(error.problem or error.context or "invalid YAML").split())
        if "duplicate key" in str(error):
            what = f"duplicate key {_duplicate_key_name(error)}".rstrip()
        raise ProfileError([ProfileProblem(source, line, column, "", f"YAML: {what}")]) from None
    except YAMLError as error:
        raise ProfileError([ProfileProblem(source, 1, 1, "", f"YAML: {error}")]) from None


def _duplicate_key_name(error: MarkedYAMLError) -> str:
    problem = str(error.problem or "")
    # ruamel says: found duplicate key "disk" with value "..." (original value: "...")
    start = problem.find('"')
    end = problem.find('"', start + 1)
    return problem[start : end + 1] if 0 <= start < end else ""


def _to_plain(node: Any, path: tuple[str | int, ...], positions: Positions) -> Any:
    """Builtin containers and scalars, recording where each key and item starts."""
    if isinstance(node, CommentedMap):
        out: dict[Any, Any] = {}
        for key, value in node.items():
            line, column = node.lc.key(key)
            positions[(*path, key)] = (line + 1, column + 1)
            out[key] = _to_plain(value, (*path, key), positions)
        return out
    if isinstance(node, CommentedSeq):
        items = []
        for index, value in enumerate(node):
            line, column = node.lc.item(index)
            positions[(*path, index)] = (line + 1, column + 1)
            items.append(_to_plain(value, (*path, index), positions))
        return items
    if isinstance(node, bool) or node is None:
        return node
    for builtin in (int, float, str):
        if isinstance(node, builtin):
            return builtin(node)
    return node


def _problem_from_pydantic(detail: ErrorDetails, source: str, positions: Positions) -> ProfileProblem:
    # pydantic adds "[key]" when a mapping's key (not its value) is invalid.
    # And the tag of a tagged union's form (remirror.profile.model.UNION_TAGS).
    path = tuple(part for part in detail["loc"] if part != "[key]" and part not in UNION_TAGS)
    kind = detail["type"]
    if kind == "extra_forbidden":
        key = path[-1] if path else ""
        if key in _SECRET_KEYS:
            message = (
                "inline secrets are not accepted:"
                " put the secret in a file (mode 0600) and name it with password_file"
            )
        else:
            message = "unknown key"
    elif kind == "missing":
        message = "required key is missing"
    elif kind in ("value_error", "assertion_error"):
        message = detail["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    elif kind == "literal_error":
        expected = detail.get("ctx", {}).get("expected", "")
        message = f"must be one of {expected}, not {detail['input']!r}"
    else:
        message = detail["msg"][:1].lower() + detail["msg"][1:]
    return _problem(source, positions, path, message)


def cautions(profile: Profile) -> list[ProfileProblem]:
    """The profile's warnings (remirror.profile.rules.cautions), each at its file:line."""
    return [problem_at(profile, path, message) for path, message in rules.cautions(profile)]


def problem_at(profile: Profile, path: tuple[str | int, ...], message: str) -> ProfileProblem:
    """A problem found after loading, at the file:line:col of `path` in the profile."""
    return _problem(profile._source, profile._positions, path, message)


def _problem(source: str, positions: Positions, path: tuple[str | int, ...], message: str) -> ProfileProblem:
    """A problem located at the deepest part of `path` present in the file."""
    line, column = 1, 1
    for end in range(len(path), 0, -1):
        if path[:end] in positions:
            line, column = positions[path[:end]]
            break
    return ProfileProblem(source, line, column, rules.format_path(path), message)


def _sorted(problems: list[ProfileProblem]) -> list[ProfileProblem]:
    return sorted(problems, key=lambda p: (p.line, p.column, p.path))
