"""The local runner: real processes, the gateway's promises."""

from __future__ import annotations

import json
import logging

import pytest

from remirror.errors import CommandError, CommandTimeout
from remirror.runner.base import REDACTED, redact
from remirror.runner.local import LocalRunner


def test_runs_an_argv_and_returns_its_output() -> None:
    done = LocalRunner("hq").run(["printf", "%s|", "a b", "$HOME", "*"])
    assert done.ok
    # No shell: spaces, $ and * reach the program untouched.
    assert done.stdout == "a b|$HOME|*|"
    assert done.site == "hq"


def test_commands_see_the_c_locale() -> None:
    done = LocalRunner().run(["sh", "-c", 'echo "$LC_ALL $LANG"'])
    assert done.stdout.strip() == "C C"


def test_stdin_is_passed_and_otherwise_empty() -> None:
    assert LocalRunner().run(["cat"], stdin="secret\n").stdout == "secret\n"
    assert LocalRunner().run(["cat"]).stdout == ""


def test_a_failure_carries_site_argv_code_and_stderr_tail() -> None:
    script = "for i in 1 2 3 4 5 6 7; do echo line$i >&2; done; exit 3"
    with pytest.raises(CommandError) as caught:
        LocalRunner("dr").run(["sh", "-c", script])
    error = caught.value
    assert error.site == "dr"
    assert error.argv == ("sh", "-c", script)
    assert error.returncode == 3
    assert error.stderr_tail == "line3 | line4 | line5 | line6 | line7"
    assert str(error).startswith("site dr: `sh -c")
    assert "(exit code 3): line3" in str(error)


def test_accepted_exit_codes_do_not_raise() -> None:
    assert LocalRunner().run(["sh", "-c", "exit 15"], ok_codes=(0, 15)).returncode == 15


def test_a_missing_program_is_an_error_not_a_crash() -> None:
    with pytest.raises(CommandError) as caught:
        LocalRunner().run(["no-such-program-remirror"])
    assert caught.value.returncode == 127
    assert "command not found" in str(caught.value)


def test_a_command_past_its_timeout_is_stopped() -> None:
    with pytest.raises(CommandTimeout) as caught:
        LocalRunner().run(["sleep", "30"], timeout=0.3)
    assert "timed out after 0.3s" in str(caught.value)


def test_a_shell_string_is_refused() -> None:
    with pytest.raises(TypeError, match="not a shell string"):
        LocalRunner().run("rm -rf /tmp/x")


def test_secrets_never_reach_logs_or_errors(caplog: pytest.LogCaptureFixture) -> None:
    secret = "s3cr3t-chap-pass"
    caplog.set_level(logging.DEBUG, logger="remirror")
    with pytest.raises(CommandError) as caught:
        LocalRunner().run(
            ["sh", "-c", 'echo "bad password $0" >&2; exit 24', secret],
            secrets=[secret],
        )
    assert secret not in str(caught.value)
    assert REDACTED in " ".join(caught.value.argv)
    assert secret not in caplog.text
    assert f"{REDACTED}" in caplog.text  # the command was logged, redacted


def test_redact_masks_longest_secret_first() -> None:
    assert redact("pw=abcdef pw2=abc", ["abc", "abcdef"]) == f"pw={REDACTED} pw2={REDACTED}"
    assert redact("nothing here", [""]) == "nothing here"


def test_redact_masks_a_secret_as_an_error_may_quote_it_escaped() -> None:
    secret = "ab\\cd\"e'f"  # a CHAP password may hold a backslash and quotes
    for quoted in (repr(secret), repr(secret.encode()), json.dumps(secret), str(KeyError(secret))):
        assert "cd" not in redact(f"failed: {quoted}", [secret]), quoted


def test_a_command_stopped_at_its_timeout_is_reported_without_its_secrets() -> None:
    secret = "s3cr3t-chap-pass"
    with pytest.raises(CommandTimeout) as caught:
        LocalRunner().run(
            ["sh", "-c", 'echo "login with $0" >&2; sleep 5', secret], secrets=[secret], timeout=0.5
        )
    assert "login with" in str(caught.value)  # what it said is kept, for the operator
    assert secret not in str(caught.value), str(caught.value)
    assert secret not in caught.value.stderr_tail
    assert caught.value.__context__ is None  # the unredacted error is not attached to it
