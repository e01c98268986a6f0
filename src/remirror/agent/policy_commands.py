"""The `run` step's command forms: the only programs, and the only ways of running them, that a
remote controller may ask of a site (remirror.agent.policy)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from remirror.agent.policy import NAME, UUID, Refused

if TYPE_CHECKING:
    from remirror.agent.policy import Checker


def check_argv(check: Checker, argv: list[str]) -> None:
    """Refused unless `argv` is one of the forms below, naming only what the site's scope allows."""
    forms = {"mdadm": _mdadm, "iscsiadm": _iscsiadm, "dmsetup": _dmsetup, "dd": _dd}
    if argv[0] not in forms:
        raise Refused(f"{argv[0]!r}: remirror's agent runs only mdadm, iscsiadm, dmsetup and dd")
    forms[argv[0]](check, argv[1:])


def _mdadm(check: Checker, args: list[str]) -> None:
    values = {
        "--metadata": r"1\.[02]",
        "--level": "1",
        "--raid-devices": r"\d{1,2}",
        "--uuid": UUID.pattern,
        "--name": NAME.pattern,
        "--homehost": "<none>",
        "--bitmap": "none|internal",
        "--bitmap-chunk": r"\d+K",
        "--size": r"\d+M",
        "--write-behind": r"\d+",
    }
    flags = {"--stop", "--grow", "--add", "--re-add", "--fail", "--remove", "--zero-superblock"}
    flags |= {"--readwrite", "--create", "--run", "--assume-clean"}
    for arg in args:
        option, equals, value = arg.partition("=")
        if equals and option in values and re.fullmatch(values[option], value):
            if option == "--name":
                check.mirror(value)
            continue
        if arg in flags or arg in ("detached", "failed", "missing"):
            continue
        if arg.startswith("-"):
            raise Refused(f"mdadm {arg}: not an option remirror uses")
        check.device(arg)


def _iscsiadm(check: Checker, args: list[str]) -> None:
    if args[:3] != ["-m", "node", "-T"] or len(args) < 7 or args[4] != "-p":
        raise Refused("iscsiadm: only `-m node -T IQN -p PORTAL` with one operation")
    check.iqn(args[3])
    check.portal(args[5])
    rest = args[6:]
    if rest in (["--login"], ["--logout"], ["-o", "new"], ["-o", "delete"]):
        return
    pairs = rest[2:]
    if rest[:2] != ["-o", "update"] or not pairs or len(pairs) % 4:
        raise Refused(f"iscsiadm {' '.join(rest[:2])}: not an operation remirror uses")
    for i in range(0, len(pairs), 4):
        n, key, v, _ = pairs[i : i + 4]
        if n != "-n" or v != "-v" or not key.startswith("node.") or "password" in key:
            raise Refused(f"iscsiadm -o update {key}: not a node setting remirror makes")


def _dmsetup(check: Checker, args: list[str]) -> None:
    if len(args) == 2 and args[0] == "remove":
        return check.dm_name(args[1])
    if len(args) == 4 and args[0] == "create" and args[2] == "--table":
        check.dm_name(args[1])
        return check.table(args[3])
    raise Refused(f"dmsetup {' '.join(args[:1])}: only `remove NAME` and `create NAME --table TABLE`")


def _dd(check: Checker, args: list[str]) -> None:
    # A cache's first block zeroed (remirror.plan.cache), so no old superblock is taken up.
    shape = ["if=/dev/zero", "of=*", "bs=4096", "count=1", "oflag=direct", "status=none"]
    if len(args) != len(shape) or any(a != s for a, s in zip(args, shape, strict=True) if s != "of=*"):
        raise Refused("dd: only the zeroing of a cache's first 4KiB")
    check.device(args[1].removeprefix("of="))
