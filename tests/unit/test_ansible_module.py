"""The Ansible module's decisions (the collection remirror.remirror: plugins/modules/remirror_apply.py): check mode
plans only, safe mode is remirror's refusal of a destructive plan, changed comes from remirror's
own report.

remirror itself is stood in for by fixtures/fake-remirror, answering as `remirror plan/apply
-o json` answer (their JSON as tests/unit/test_cli.py pins it); the hosts' lab
(tests/hosts_lab/test_three_sites.py) runs the real one across three hosts.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from remirror.errors import DestructivePlan

PLAYBOOKS = Path(__file__).parents[2] / "playbooks"
COLLECTION = PLAYBOOKS / "collections/ansible_collections/remirror/remirror"
MODULE = COLLECTION / "plugins/modules/remirror_apply.py"
CREATE = {"site": "a", "verb": "CreateArray", "subject": "/dev/md/m0", "symbol": "+", "destructive": None}
WIPE = {**CREATE, "destructive": "ext4 on /dev/b0"}


FAKE = Path(__file__).parent / "fixtures/fake-remirror"


def run_module(
    tmp_path: Path,
    plan: list[dict[str, Any]],
    remaining: list[dict[str, Any]],
    check: bool = False,
    mirrors: tuple[str, ...] = ("m0",),
    **args: Any,
) -> dict[str, Any]:
    """The module's result, with fixtures/fake-remirror planning `plan` and leaving `remaining`
    (for each of the profile's `mirrors`, under `state: absent`)."""
    state = {"plan": plan, "remaining": remaining, "mirrors": list(mirrors)}
    (tmp_path / "state.json").write_text(json.dumps(state))
    (tmp_path / "state.json.calls").unlink(missing_ok=True)
    params = {"profile": str(tmp_path / "p.yaml"), "remirror": str(FAKE), **args}
    if check:
        params["_ansible_check_mode"] = True
    (tmp_path / "args.json").write_text(json.dumps({"ANSIBLE_MODULE_ARGS": params}))
    done = subprocess.run(
        [sys.executable, str(MODULE), str(tmp_path / "args.json")],
        capture_output=True,
        text=True,
        check=False,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def calls(tmp_path: Path) -> list[str]:
    return (tmp_path / "state.json.calls").read_text().splitlines()


def test_check_mode_plans_the_profile_about_to_be_written_and_changes_nothing(tmp_path: Path) -> None:
    result = run_module(tmp_path, [CREATE], [], check=True, content="version: 1\n")
    assert result.get("changed") is True, result
    assert result["actions"] == [CREATE]
    (call,) = calls(tmp_path)
    assert call.startswith("plan --detailed-exitcode -o json ")
    planned = Path(call.split()[-1])
    assert planned.name.startswith(".check-")  # a copy of `content`, not the deployed file
    assert not list(tmp_path.glob(".check-*"))  # the copy is gone


def test_check_mode_with_nothing_to_do_is_not_changed(tmp_path: Path) -> None:
    result = run_module(tmp_path, [], [], check=True)
    assert result["changed"] is False


def test_safe_mode_is_remirrors_own_refusal_named_as_such(tmp_path: Path) -> None:
    result = run_module(tmp_path, [CREATE, WIPE], [])
    assert result["failed"] is True
    assert result["msg"].startswith("safe mode: remirror: refusing to write over data")
    assert "ext4 on /dev/b0" in result["msg"]
    assert result["msg"].endswith("set remirror_allow_destructive: true to allow it")
    assert (result["reason"], result["error"]["destroys"]) == ("destructive", ["ext4 on /dev/b0"])
    (call,) = calls(tmp_path)  # one apply, without --allow-destructive: remirror refuses before any change
    assert call.startswith("apply --yes -o json ")


def test_the_module_knows_remirrors_refusal_by_its_reason_not_its_words() -> None:
    """The module runs on the site with Ansible's Python and cannot import remirror: it reads the
    refusal's `reason` from the JSON error document, which must stay what remirror.errors says."""
    module_text = MODULE.read_text()
    reason = module_text.split('DESTRUCTIVE = "', 1)[1].split('"', 1)[0]
    assert reason == DestructivePlan.reason
    assert "REFUSED" not in module_text  # no English matched any more


def test_allowed_destructive_plans_apply_with_the_flag(tmp_path: Path) -> None:
    result = run_module(tmp_path, [WIPE], [], allow_destructive=True)
    assert result["changed"] is True
    assert calls(tmp_path)[-1].startswith("apply --yes --allow-destructive -o json ")


def test_changed_comes_from_the_apply_report_and_leftovers_fail(tmp_path: Path) -> None:
    assert run_module(tmp_path, [], [])["changed"] is False
    assert [c.split()[0] for c in calls(tmp_path)] == ["apply"]  # one observe of the sites, not two
    done = run_module(tmp_path, [CREATE], [])
    assert done["changed"] is True
    assert "failed" not in done
    left = run_module(tmp_path, [CREATE], [CREATE])
    assert left["failed"] is True
    assert "left actions undone" in left["msg"]


def test_every_site_is_prepared_before_any_apply_and_a_failed_one_ends_the_run() -> None:
    """site.yml's order (docs/ansible.md): a replica that failed its preparation must not be
    driven by a primary's apply with a profile or secrets it never got."""
    prepare, apply = YAML(typ="safe").load(PLAYBOOKS / "site.yml")
    assert set(prepare["hosts"].split(":")) == {"remirror_replicas", "remirror_primaries"}
    assert prepare["any_errors_fatal"] is True
    assert prepare["roles"] == [{"role": "remirror.remirror.remirror"}]  # tasks/main.yml: no apply
    assert apply["hosts"] == "remirror_primaries"
    assert [t["ansible.builtin.import_role"].get("tasks_from") for t in apply["tasks"]] == ["apply", "health"]
    main = YAML(typ="safe").load(COLLECTION / "roles/remirror/tasks/main.yml")
    assert [t["ansible.builtin.import_tasks"] for t in main] == [
        "install.yml",
        "deploy.yml",
        "points.yml",
        "drills.yml",
        "verify.yml",  # where a mirror's primary is: the monthly verify
        "boot.yml",  # every site's remirror-start@: a DR site makes its export again at boot
    ]


def test_diff_mode_shows_the_actions_as_remirror_plan_prints_them(tmp_path: Path) -> None:
    result = run_module(tmp_path, [CREATE, WIPE], [], check=True, _ansible_diff=True)
    assert result["diff"]["prepared"] == (
        "+ a: CreateArray /dev/md/m0\n+ a: CreateArray /dev/md/m0  [DESTROYS: ext4 on /dev/b0]\n"
    )
    assert "diff" not in run_module(tmp_path, [CREATE], [], check=True)  # only when asked


def test_state_absent_destroys_each_mirror_of_the_profile(tmp_path: Path) -> None:
    teardown = {**CREATE, "verb": "StopArray", "symbol": "-"}
    both = ("m0", "m1")
    checked = run_module(tmp_path, [teardown], [], check=True, mirrors=both, state="absent")
    assert (checked["changed"], len(checked["actions"])) == (True, 2)
    assert [c.split()[:2] for c in calls(tmp_path)] == [
        ["validate", "-o"],
        ["destroy", "--dry-run"],
        ["destroy", "--dry-run"],
    ]
    done = run_module(tmp_path, [teardown], [], mirrors=both, state="absent")
    assert done["changed"] is True
    assert [c.split()[-1] for c in calls(tmp_path) if c.startswith("destroy --yes")] == ["m0", "m1"]
    assert run_module(tmp_path, [], [], mirrors=both, state="absent")["changed"] is False  # already gone
    stuck = run_module(tmp_path, [teardown], [teardown], mirrors=both, state="absent")
    assert stuck["failed"] is True
    assert stuck["msg"].startswith("destroy of m0 left actions undone")


def test_without_systemd_cron_reconciles_and_checks_the_profile_every_five_minutes() -> None:
    """The health task's cron file, rendered as Ansible renders it (Jinja, the role's defaults):
    the hosts' lab runs systemd, so its tests take the units' path; this is the other one."""
    from jinja2 import Environment, StrictUndefined

    tasks = YAML(typ="safe").load(COLLECTION / "roles/remirror/tasks/health.yml")
    (cron,) = [t for t in tasks if "cron" in t["name"]]
    assert "!= 'systemd'" in cron["when"]
    defaults = {
        "remirror_command": "/usr/local/bin/remirror",
        "remirror_profile_path": "/etc/remirror/m.yaml",
    }
    for watch, check in ((True, True), (False, True), (True, False)):
        text = (
            Environment(undefined=StrictUndefined, keep_trailing_newline=True)  # noqa: S701 - a cron file, as Ansible renders it
            .from_string(cron["ansible.builtin.copy"]["content"])
            .render(**defaults, remirror_watch=watch, remirror_health_check=check)
        )
        entries = [line for line in text.splitlines() if line.startswith("*/5 * * * * root ")]
        wanted = ["/usr/local/bin/remirror reconcile /etc/remirror/m.yaml >/dev/null"] * watch + [
            'out=$(/usr/local/bin/remirror check -t 120 /etc/remirror/m.yaml) || echo "$out"'
        ] * check
        assert [line.removeprefix("*/5 * * * * root ") for line in entries] == wanted, text
        assert "PATH=/usr/local/sbin:/usr/local/bin:" in text
