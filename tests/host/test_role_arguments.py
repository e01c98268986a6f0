"""The role's argument specs (meta/argument_specs.yml), checked by Ansible itself as each entry
point starts, on the example inventory's variables: only the checks run (`--tags` names no
task of the role's, and the checks are tagged `always`), so nothing on this host changes.

Each check templates every variable it names with the role's defaults, before any of the
role's tasks has run: a default that leans on a variable a task sets later fails it."""

from __future__ import annotations

from pathlib import Path

from ruamel.yaml import YAML

from tests.host.ansible_play import run_play

EXAMPLE = Path(__file__).parents[2] / "playbooks/inventory.example/group_vars/all"
ROLE = "remirror.remirror.remirror"


def example() -> dict[str, object]:
    """The example inventory's variables (its vault file is an example in clear)."""
    return {
        k: v for f in sorted(EXAMPLE.glob("*.yml")) for k, v in YAML(typ="safe").load(f.read_text()).items()
    }


def test_each_entry_point_takes_the_example_inventorys_variables(tmp_path: Path) -> None:
    variables = example()
    tasks = [
        {"ansible.builtin.import_role": {"name": ROLE, "tasks_from": entry}} for entry in ("apply", "health")
    ]
    said = run_play(
        tmp_path, {"vars": variables, "roles": [ROLE], "tasks": tasks}, "--tags", "only-the-checks"
    )
    for entry in ("main", "apply", "health"):
        assert f"Validating arguments against arg spec '{entry}'" in said, said
    assert "failed=0" in said, said


def test_a_variable_of_the_wrong_kind_is_refused_before_any_task(tmp_path: Path) -> None:
    import pytest

    variables = {**example(), "remirror_apt_cache_valid_time": "a day"}
    with pytest.raises(AssertionError, match="remirror_apt_cache_valid_time"):
        run_play(tmp_path, {"vars": variables, "roles": [ROLE]}, "--tags", "only-the-checks")
