"""The alert rules and the Grafana dashboard in contrib/: they name only metrics remirror
writes, and Prometheus' own checker accepts the rules and passes their tests
(contrib/prometheus/remirror-alerts.test.yml). promtool comes with Debian's `prometheus`
package, which ./dev installs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from typing import Any

import pytest
from ruamel.yaml import YAML

from remirror.health.metrics import METRICS
from tests.conftest import REPO

RULES = REPO / "contrib" / "prometheus" / "remirror-alerts.yml"
RULE_TESTS = REPO / "contrib" / "prometheus" / "remirror-alerts.test.yml"
DASHBOARD = REPO / "contrib" / "grafana" / "remirror-dashboard.json"
METRIC = re.compile(r"\bremirror_[a-z_]+")


def promtool(*args: str) -> str:
    tool = shutil.which("promtool")
    if tool is None:
        pytest.fail("promtool not found: apt-get install prometheus (./dev installs it)")
    done = subprocess.run([tool, *args], capture_output=True, text=True, check=False, cwd=RULES.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_prometheus_accepts_the_rules_and_they_pass_their_tests() -> None:
    assert "SUCCESS: 15 rules found" in promtool("check", "rules", RULES.name)
    assert "SUCCESS" in promtool("test", "rules", RULE_TESTS.name)


def test_the_rules_name_only_metrics_remirror_writes_and_say_how_bad() -> None:
    rules = YAML(typ="safe").load(RULES.read_text())["groups"][0]["rules"]
    for rule in rules:
        assert set(METRIC.findall(rule["expr"])) <= set(METRICS), rule["alert"]
        assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
        assert "{{ $labels.profile }}" in rule["annotations"]["summary"], rule["alert"]
    tested = {
        t["alertname"]
        for case in YAML(typ="safe").load(RULE_TESTS.read_text())["tests"]
        for t in case["alert_rule_test"]
    }
    assert {r["alert"] for r in rules} - tested == set(), "alerts without a promtool test"


def panels() -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = json.loads(DASHBOARD.read_text())["panels"]
    return found


def test_the_dashboard_shows_state_rpo_out_of_sync_bytes_and_verify_of_the_chosen_hosts_and_profiles() -> (
    None
):
    exprs = [t["expr"] for p in panels() for t in p["targets"]]
    used = {m for e in exprs for m in METRIC.findall(e)}
    assert used <= set(METRICS)
    assert {"remirror_mirror_state", "remirror_rpo_seconds", "remirror_leg_out_of_sync_bytes"} <= used
    assert "remirror_verify_last_result" in used
    # Every query is of the chosen hosts and profiles: an operator of many sites picks them.
    for expr in exprs:
        chosen = 'instance=~"$instance", profile=~"$profile"'
        assert expr.count(chosen) == len(METRIC.findall(expr)), expr
    variables = {v["name"]: v for v in json.loads(DASHBOARD.read_text())["templating"]["list"]}
    assert variables["instance"]["multi"]
    assert variables["profile"]["multi"]
    ids = [p["id"] for p in panels()]
    assert len(ids) == len(set(ids))
