#!/usr/bin/python
"""Ansible module: make the sites match a remirror profile, with check mode and safe mode.

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
author: remirror developers
"""

EXAMPLES = r"""
- name: Mirror the disks as the profile says
  remirror_apply:
    profile: /etc/remirror/remirror.yaml
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


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "profile": {"type": "path", "required": True},
            "content": {"type": "str"},
            "remirror": {"type": "path", "default": "/usr/local/bin/remirror"},
            "allow_destructive": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    remirror, profile = module.params["remirror"], module.params["profile"]
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
        module.exit_json(changed=rc == EXIT_CHANGES, actions=plan["actions"])
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
    module.exit_json(changed=report["changed"], actions=report["actions"])


if __name__ == "__main__":
    main()
