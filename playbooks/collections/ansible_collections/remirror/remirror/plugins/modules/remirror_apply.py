#!/usr/bin/python
"""Ansible module: make the sites match a remirror profile, with check, diff and safe mode.

The module is a thin shell around remirror's own commands, which already plan
without changing anything and report what they did as JSON:
- check mode: `remirror plan --detailed-exitcode`: changed when the plan is
  not empty (exit 2), nothing touched;
- otherwise: `remirror apply --yes -o json`, changed from its report. Safe
  mode (as in linux-system-roles/storage) is remirror's own: apply refuses a
  plan that would write over data, before it changes anything, unless it is
  given `--allow-destructive`, which only `allow_destructive` passes. One
  apply, not a plan and then an apply: each observes every site (seconds to
  a minute on a slow link).
- `state: absent`: `remirror destroy --yes` of each mirror of the profile
  (check mode: `destroy --dry-run`); the data stays on the disks.
- diff mode: the actions, one line each as `remirror plan` prints them.
A failure is read from remirror's `-o json` error document (its `reason`:
`destructive`, `busy`, `split_brain`, ...), not from its words.
"""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: remirror_apply
short_description: Make the sites match a remirror profile
description:
  - Runs C(remirror plan) and C(remirror apply) on the controller site (the primary).
  - In check mode only plans, and reports changed when the plan is not empty.
options:
  profile:
    description: Path of the profile on the target host.
    type: path
    required: true
  content:
    description:
      - The profile as it is about to be written to I(profile).
      - In check mode the file is not written yet, so the plan is made from this text instead.
    type: str
  remirror:
    description: The remirror command.
    type: path
    default: /usr/local/bin/remirror
  allow_destructive:
    description: Allow a plan that writes over disks holding data (filesystems, other arrays).
    type: bool
    default: false
  state:
    description:
      - C(present) builds and repairs the mirrors; C(absent) takes each mirror of the profile apart
        (C(remirror destroy)), leaving the data on its disks.
    type: str
    choices: [present, absent]
    default: present
attributes:
  check_mode:
    support: full
    description: Only plans (C(remirror plan --detailed-exitcode)); changed when the plan is not empty.
  diff_mode:
    support: full
    description: The plan's actions, one line each, as C(remirror plan) prints them.
  platform:
    support: full
    platforms: posix
    description: Runs on the primary site, which reaches the others itself over SSH (tested on Debian 12).
notes:
  - Safe mode is remirror's own; a plan that would write over a disk that holds data fails the task
    before anything is changed, unless I(allow_destructive).
  - The walk-through is docs/ansible.md in remirror's source.
author: remirror developers
"""

EXAMPLES = r"""
- name: Mirror the disks as the profile says
  remirror.remirror.remirror_apply:
    profile: /etc/remirror/remirror.yaml

- name: Take the mirrors apart (the data stays on the disks)
  remirror.remirror.remirror_apply:
    profile: /etc/remirror/remirror.yaml
    state: absent
"""

RETURN = r"""
actions:
  description: The plan's actions (check mode), or the actions carried out, as remirror reports them.
  type: list
  elements: dict
  returned: always
"""

import json
import os
import tempfile
from pathlib import Path

from ansible.module_utils.basic import AnsibleModule

EXIT_CHANGES = 2  # remirror plan --detailed-exitcode: there is something to do
# The `reason` of remirror's error document for a plan that writes over data
# (remirror.errors.DestructivePlan).
DESTRUCTIVE = "destructive"


def _report(module: AnsibleModule, argv: list[str], ok: tuple[int, ...]) -> tuple[int, dict]:
    """Run remirror with `-o json`; its report, or the task failed with remirror's own message."""
    rc, out, err = module.run_command(argv)
    try:
        report = json.loads(out)
    except ValueError:  # remirror stopped before it could say anything in JSON
        report = None
    if isinstance(report, dict) and report.get("kind") == "error":
        message = f"remirror: {report['message']}"
        if report["reason"] == DESTRUCTIVE:
            message = f"safe mode: {message}; set remirror_allow_destructive: true to allow it"
        module.fail_json(msg=message, rc=rc, reason=report["reason"], error=report)
    if report is None or rc not in ok:
        lines = (err or out).strip().splitlines()
        module.fail_json(msg=lines[-1][:500] if lines else f"{argv[1]} failed ({rc})", rc=rc)
    return rc, report


def _plan_only(module: AnsibleModule, remirror: str, profile: str) -> tuple[int, dict]:
    return _report(
        module, [remirror, "plan", "--detailed-exitcode", "-o", "json", profile], (0, EXIT_CHANGES)
    )


def _line(action: dict) -> str:
    """An action as `remirror plan` prints it (remirror.plan.actions.Action.line)."""
    warning = f"  [DESTROYS: {action['destructive']}]" if action.get("destructive") else ""
    return f"{action['symbol']} {action['site']}: {action['verb']} {action['subject']}{warning}"


def _done(module: AnsibleModule, changed: bool, actions: list, **extra: object) -> None:
    """Exit with the actions, and in diff mode the lines of them (Ansible's `prepared` diff)."""
    if module._diff:
        extra["diff"] = {"prepared": "\n".join(_line(a) for a in actions) + "\n" if actions else ""}
    module.exit_json(changed=changed, actions=actions, **extra)


def _absent(module: AnsibleModule, remirror: str, profile: str) -> None:
    """Destroy every mirror of the profile (in check mode, plan it): the data stays on the disks."""
    _, described = _report(module, [remirror, "validate", "-o", "json", profile], (0,))
    names = [m["name"] for m in described["profile"]["mirrors"]]
    actions: list = []
    changed = False
    for name in names:
        if module.check_mode:
            _, plan = _report(module, [remirror, "destroy", "--dry-run", "-o", "json", profile, name], (0,))
            actions += plan["actions"]
            changed = changed or plan["changes"]
            continue
        rc, report = _report(module, [remirror, "destroy", "--yes", "-o", "json", profile, name], (0, 1))
        actions += report["actions"]
        changed = changed or report["changed"]
        if rc != 0:
            module.fail_json(
                msg=f"destroy of {name} left actions undone: "
                + "; ".join(f"{a['site']} {a['verb']} {a['subject']}" for a in report["remaining"]),
                changed=changed,
                actions=actions,
            )
    _done(module, changed, actions)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "profile": {"type": "path", "required": True},
            "content": {"type": "str"},
            "remirror": {"type": "path", "default": "/usr/local/bin/remirror"},
            "allow_destructive": {"type": "bool", "default": False},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        },
        supports_check_mode=True,
    )
    remirror, profile = module.params["remirror"], module.params["profile"]
    if module.params["state"] == "absent":
        _absent(module, remirror, profile)
        return
    if module.check_mode:
        content = module.params["content"]
        if content is None:
            rc, plan = _plan_only(module, remirror, profile)
        else:  # the profile the run would write: planned from a copy beside where it would land
            where = Path(profile).parent  # not there yet on a first run in check mode
            fd, copy = tempfile.mkstemp(
                prefix=".check-", suffix=".yaml", dir=where if where.is_dir() else None
            )
            try:
                with os.fdopen(fd, "w") as out:
                    out.write(content)
                rc, plan = _plan_only(module, remirror, copy)
            finally:
                Path(copy).unlink()
        _done(module, rc == EXIT_CHANGES, plan["actions"])
    argv = [remirror, "apply", "--yes", "-o", "json", profile]
    if module.params["allow_destructive"]:
        argv.insert(3, "--allow-destructive")
    rc, report = _report(module, argv, (0, 1))
    if rc != 0:
        module.fail_json(
            msg="apply left actions undone: "
            + "; ".join(f"{a['site']} {a['verb']} {a['subject']}" for a in report["remaining"]),
            changed=report["changed"],
            actions=report["actions"],
        )
    _done(module, report["changed"], report["actions"])


if __name__ == "__main__":
    main()
