"""The CLI as an operator meets it: streams, exit codes, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from remirror import __version__
from remirror.cli import main
from remirror.cli.output import SCHEMA_VERSION
from tests.conftest import PROFILES, REPO

TWO_SITE = str(PROFILES / "two-site.yaml")
# Where the contract's `write_behind` is (its line moves as the contract grows).
WRITE_BEHIND_LINE = next(
    n for n, line in enumerate(Path(TWO_SITE).read_text().splitlines(), 1) if "write_behind:" in line
)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(list(args))
    out, err = capsys.readouterr()
    code = done.value.code
    return (code if isinstance(code, int) else 1), out, err


def test_validate_describes_a_good_profile(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "validate", TWO_SITE)
    assert code == 0
    # The contract's export listens everywhere: valid, warned. Its smallest mirror gives no CHAP,
    # so apply generates it: no warning.
    assert [line.split(": warning: ")[1].split(":")[0] for line in err.splitlines()] == [
        "mirrors[0].export.portal",
    ]
    assert "valid profile 'acme'" in out
    assert "replica  dr:/dev/disk/by-id/ata-ST2000DM008_ZFL0WXYZ" in out
    assert "\x1b[" not in out  # not a terminal: no colour codes


def test_validate_json_carries_the_schema_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "validate", "-o", "json", TWO_SITE)
    document = json.loads(out)
    assert code == 0
    assert document["schema_version"] == SCHEMA_VERSION
    assert document["valid"] is True
    assert document["profile"]["mirrors"][0]["replication"]["bitmap_chunk"] == 64 * 1024**2
    assert [w["path"] for w in document["warnings"]] == ["mirrors[0].export.portal"]


def test_a_bad_profile_is_one_line_per_problem_and_exit_3(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "x.yaml"
    bad.write_text((PROFILES / "two-site.yaml").read_text().replace("mode: async", "mode: sync", 1))
    code, out, err = run(capsys, "validate", str(bad))
    assert code == 3
    assert out == ""
    assert (
        err
        == f"{bad}:{WRITE_BEHIND_LINE}:7: mirrors[0].replication.write_behind: only allowed with mode: async\n"
    )


def test_a_bad_profile_in_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "x.yaml"
    bad.write_text("version: 1\nname: x\nsites: {}\nmirrors: []\n")
    code, out, _ = run(capsys, "validate", "-o", "json", str(bad))
    document = json.loads(out)
    assert code == 3
    assert document["valid"] is False
    assert {p["path"] for p in document["problems"]} == {"sites", "mirrors"}
    assert all(p["line"] in (3, 4) for p in document["problems"])


def test_validate_checks_every_file_given_and_fails_if_one_is_bad(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "x.yaml"
    bad.write_text((PROFILES / "two-site.yaml").read_text().replace("mode: async", "mode: sync", 1))
    small = str(PROFILES / "single-mirror.yaml")
    code, out, err = run(capsys, "validate", TWO_SITE, str(bad), small)
    assert code == 3
    assert "valid profile 'acme'" in out
    assert "valid profile 'office'" in out  # the one after the bad file is checked too
    assert f"{bad}:{WRITE_BEHIND_LINE}:7: mirrors[0].replication.write_behind" in err
    code, out, _ = run(capsys, "validate", "-o", "json", TWO_SITE, small)
    document = json.loads(out)
    assert code == 0
    assert document["valid"] is True
    assert [f["file"] for f in document["files"]] == [TWO_SITE, small]
    assert [f["profile"]["name"] for f in document["files"]] == ["acme", "office"]


def test_usage_errors_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "validate")
    assert code == 3
    assert "Missing argument 'PROFILE...'" in err
    code, _, err = run(capsys, "no-such-verb")
    assert code == 3


def test_check_of_a_broken_profile_is_unknown(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "x.yaml"
    bad.write_text((PROFILES / "two-site.yaml").read_text().replace("mode: async", "mode: sync", 1))
    code, out, _ = run(capsys, "check", str(bad))
    assert code == 3  # monitoring-plugins UNKNOWN, never a false OK
    assert out.startswith(f"REMIRROR UNKNOWN - {bad}:{WRITE_BEHIND_LINE}:7: ")


def test_check_with_a_bad_threshold_is_unknown(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "check", "-w", "lots", TWO_SITE)
    assert code == 3
    assert out.startswith("REMIRROR UNKNOWN - bad threshold: ")


def test_status_without_a_profile_names_the_default_one(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("REMIRROR_PROFILE", str(tmp_path / "none.yaml"))
    code, out, err = run(capsys, "status")
    assert (code, out) == (3, "")
    assert str(tmp_path / "none.yaml") in err


def test_schema_is_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "schema")
    assert code == 0
    assert json.loads(out)["title"] == "Profile"


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(capsys: pytest.CaptureFixture[str], flag: str) -> None:
    code, out, _ = run(capsys, flag)
    assert (code, out.strip()) == (0, f"remirror, version {__version__}")


def test_check_answers_a_bad_flag_and_a_bug_as_a_plugin_unknown_on_stdout(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = run(capsys, "check", "--no-such-flag", TWO_SITE)
    assert code == 3
    assert out == "REMIRROR UNKNOWN - No such option '--no-such-flag'.\n"
    assert "Usage:" in err  # the details stay on stderr

    def broken(*_: object, **__: object) -> None:
        raise ZeroDivisionError("oops")

    monkeypatch.setattr("remirror.here.load_profile_here", broken)
    monkeypatch.setattr("remirror.profile.load_profile", broken)
    code, out, _ = run(capsys, "-v", "check", TWO_SITE)
    assert code == 3  # not 70: a plugin exits 0 to 3
    assert out == "REMIRROR UNKNOWN - internal error: ZeroDivisionError: oops\n"
    code, out, _ = run(capsys, "validate", TWO_SITE)
    assert (code, out) == (70, "")  # other verbs keep sysexits' EX_SOFTWARE


def test_a_bug_is_not_shown_as_a_traceback_without_debug(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: object, **__: object) -> None:
        raise ZeroDivisionError("oops")

    monkeypatch.setattr("remirror.profile.load_profile", broken)
    code, _, err = run(capsys, "validate", TWO_SITE)
    assert code == 70
    assert "internal error: ZeroDivisionError: oops" in err
    assert "Traceback" not in err
    code, _, err = run(capsys, "--debug", "validate", TWO_SITE)
    assert "Traceback" in err


def test_destroy_names_the_mirrors_a_profile_has(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "destroy", TWO_SITE, "no-such-mirror")
    assert (code, out) == (3, "")
    assert err == f"remirror: destroy: {TWO_SITE} has no mirror 'no-such-mirror' (it has: finance, mail)\n"


def test_the_shipped_cron_and_systemd_files_call_real_verbs_with_valid_options() -> None:
    """Each `remirror ...` command line in contrib/ parses with the CLI as it is."""
    import re
    import shlex

    import click

    from remirror.cli.app import cli

    lines = []
    for path in sorted((REPO / "contrib").rglob("*")):
        if path.is_file():
            lines += [(path, line) for line in path.read_text().splitlines() if not line.startswith("#")]
    # Where a command starts: an ExecStart path, cron's user field, a $( ).
    starts = re.compile(r"(?:bin/|root |\$\()(remirror .*)")
    calls = [(path, match.group(1)) for path, line in lines if (match := starts.search(line))]
    assert {path.name for path, _ in calls} >= {
        "remirror",
        "remirror-check@.service",
        "remirror-watch@.service",
        "remirror-start@.service",
        "remirror-drill@.service",
    }
    for path, call in calls:
        argv = shlex.split(call.split(")")[0].replace("%i", "office"))[1:]
        verb = cli.get_command(click.Context(cli), argv[0])
        assert verb is not None, (path, call)
        verb.make_context(argv[0], argv[1:])  # raises on an unknown option or a missing argument
        assert argv[-1].startswith("/etc/remirror/"), (path, call)


def test_the_shipped_units_are_hardened_and_do_not_restart_on_a_bad_profile() -> None:
    """systemd.exec hardening on every unit; a daemon's exit 3 (bad profile or flag) ends its restarts;
    the units that reach other sites over SSH can still read root's ~/.ssh."""
    units = sorted((REPO / "contrib" / "systemd").glob("*.service"))
    assert len(units) == 7
    for unit in units:
        settings = dict(
            line.split("=", 1)
            for line in unit.read_text().splitlines()
            if "=" in line and not line.startswith("#")
        )
        for key in ("NoNewPrivileges", "PrivateTmp", "ProtectControlGroups", "RestrictSUIDSGID"):
            assert settings.get(key) == "yes", (unit.name, key)
        assert settings["RestrictAddressFamilies"] == "AF_UNIX AF_INET AF_INET6 AF_NETLINK", unit.name
        remote = any(verb in unit.name for verb in ("watch", "check", "start", "verify"))
        assert settings["ProtectHome"] == ("read-only" if remote else "yes"), unit.name
        if settings.get("Type") == "notify":  # the daemons
            assert settings["Restart"] == "on-failure", unit.name
            assert settings["RestartPreventExitStatus"] == "3", unit.name


def test_the_help_summaries_are_the_verbs_own() -> None:
    """`remirror --help` lists the verbs from a table (so it imports none): it says what each says."""
    import click

    from remirror.cli.app import VERBS, cli

    for name, (_, _, summary) in VERBS.items():
        verb = cli.get_command(click.Context(cli), name)
        assert verb is not None, name
        assert verb.name == name
        assert verb.get_short_help_str(limit=10_000) == summary, name


def test_an_error_with_o_json_is_also_a_json_document_naming_its_reason(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, "destroy", "-o", "json", TWO_SITE, "nope")
    document = json.loads(out)
    assert code == 3
    assert (document["schema_version"], document["kind"], document["reason"]) == (
        SCHEMA_VERSION,
        "error",
        "usage",
    )
    assert document["message"] == err.strip().removeprefix("remirror: ")
    assert document["exit_code"] == 3
    code, out, err = run(capsys, "destroy", TWO_SITE, "nope")  # without -o json: the line alone
    assert (code, out) == (3, "")


def test_a_refusal_carries_what_a_program_needs(capsys: pytest.CaptureFixture[str]) -> None:
    from remirror.cli.app import _emit_error
    from remirror.errors import DestructivePlan, SiteBusy

    _emit_error(DestructivePlan(["site b: /dev/b0 holds ext4"]))
    refused = json.loads(capsys.readouterr().out)
    assert (refused["reason"], refused["destroys"], refused["exit_code"]) == (
        "destructive",
        ["site b: /dev/b0 holds ext4"],
        1,
    )
    _emit_error(SiteBusy("site-b", "held by remirror apply (pid 7 on a) since 10:00:00"))
    busy = json.loads(capsys.readouterr().out)
    assert (busy["reason"], busy["site"]) == ("busy", "site-b")


def test_declining_a_prompt_is_exit_1_and_says_nothing_changed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # It was exit 3, bad input; the command was right, the operator said no (terraform, apt: 1).
    import sys

    import click

    from remirror.cli.mirror import confirm
    from remirror.errors import Declined, UsageError

    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr(click, "confirm", lambda *_, **__: False)
    with pytest.raises(Declined) as declined:
        confirm("apply", "Apply: carry out these changes?")
    assert (declined.value.exit_code, declined.value.reason) == (1, "declined")
    assert declined.value.one_line() == "apply: not confirmed: nothing changed"
    monkeypatch.setattr(click, "confirm", lambda *_, **__: True)
    confirm("apply", "Apply: carry out these changes?")  # yes: goes on
    monkeypatch.setattr(sys.stdin, "isatty", lambda: False)
    with pytest.raises(UsageError, match="not a terminal, so nobody can confirm: pass --yes"):
        confirm("apply", "Apply: carry out these changes?")


def test_verify_exits_as_cmp_does(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # 0 equal, 1 they differ, 2 it could not tell (a failure on a site included), 3 bad input.
    from remirror.errors import RemirrorError
    from remirror.health.verify import Span
    from remirror.monitor import Verification

    class Controller:
        def __init__(self, _: object) -> None: ...

        def close(self) -> None: ...

    outcome: dict[str, tuple[Span, ...]] = {"mismatched": (), "busy": ()}

    def verify(*_: object, **__: object) -> Verification:
        if not outcome:
            raise RemirrorError("site dr: unreachable: no route to host")
        return Verification("finance", Span(0, 1 << 20), 1 << 20, ("hq", "dr"), bytes_received={}, **outcome)

    monkeypatch.setattr("remirror.controller.Controller", Controller)
    monkeypatch.setattr("remirror.monitor.verify", verify)
    assert run(capsys, "verify", TWO_SITE, "finance")[0] == 0
    outcome["mismatched"] = (Span(0, 4096),)
    assert run(capsys, "verify", TWO_SITE, "finance")[0] == 1
    outcome.update(mismatched=(), busy=(Span(0, 4096),))
    assert run(capsys, "verify", TWO_SITE, "finance")[0] == 2
    outcome.clear()
    code, out, _ = run(capsys, "verify", "-o", "json", TWO_SITE, "finance")
    assert (code, json.loads(out)["exit_code"]) == (2, 2)
    assert run(capsys, "verify", TWO_SITE, "finance", "--range", "nowhere")[0] == 3


def test_status_exits_1_when_a_site_did_not_answer_or_a_mirror_was_never_built(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # It exited 0 whatever it could not see: a script could not tell a full answer from half.
    import dataclasses

    from remirror.health import State
    from tests.unit.test_health_report import one
    from tests.unit.test_health_state import SYNC, applied

    mirrored = one(dict(applied(SYNC)))
    seen: dict[str, object] = {"reports": [mirrored], "unreachable": {}}

    class Controller:
        def __init__(self, _: object) -> None:
            self.unreachable = seen["unreachable"]

        def close(self) -> None: ...

    monkeypatch.setattr("remirror.controller.Controller", Controller)
    monkeypatch.setattr("remirror.monitor.snapshot", lambda _: (seen["reports"], {}))
    assert run(capsys, "status", TWO_SITE)[0] == 0
    seen["unreachable"] = {"dr": "cannot connect to dr1:22: Connection refused"}
    code, out, _ = run(capsys, "status", TWO_SITE)
    assert (code, out.splitlines()[-1]) == (
        1,
        "site dr unreachable: cannot connect to dr1:22: Connection refused",
    )
    seen.update(unreachable={}, reports=[dataclasses.replace(mirrored, state=State.ABSENT)])
    assert run(capsys, "status", "-o", "json", TWO_SITE)[0] == 1


def test_destroy_dry_run_shows_the_teardown_and_runs_nothing(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from remirror.plan.actions import Action, Plan, Verb

    stop = Action("hq", Verb.STOP_ARRAY, "/dev/md/finance", "-")

    class Controller:
        def __init__(self, _: object, **__: object) -> None: ...

        def teardown(self, _: object) -> Plan:
            return Plan((stop,))

        def apply(self, *_: object) -> None:
            raise AssertionError("a dry run ran the plan")

        def close(self) -> None: ...

    monkeypatch.setattr("remirror.controller.Controller", Controller)
    code, out, _ = run(capsys, "destroy", "--dry-run", "-o", "json", TWO_SITE, "finance")
    document = json.loads(out)
    assert (code, document["kind"], document["changes"]) == (0, "plan", True)
    assert document["actions"] == [stop.as_json()]
    code, out, _ = run(capsys, "destroy", "--dry-run", TWO_SITE, "finance")
    assert (code, out.splitlines()[0]) == (0, stop.line())


def test_an_apply_that_wrote_mdadm_conf_says_where_the_initramfs_wants_updating() -> None:
    from remirror.cli.mirror import _carry_out
    from remirror.controller import Outcome
    from remirror.plan.actions import Action, Plan, Verb

    conf = Action("dr", Verb.WRITE_MDADM_CONF, "/etc/mdadm/mdadm.conf", "~")
    plans = iter([Plan((conf,)), Plan(())])
    said: list[str] = []

    class Controller:
        def apply(self, plan: Plan, say: object) -> list[Outcome]:
            return [Outcome(action, ok=True) for action in plan.actions]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("click.echo", said.append)
        code = _carry_out("apply", lambda: next(plans), Controller(), True, False, "text")  # type: ignore[arg-type]
    assert code == 0
    assert "mdadm.conf changed on dr: `update-initramfs -u` there gives early boot the same" in said
