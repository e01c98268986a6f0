"""The side-effect gateway: the one way remirror runs a command on a site.

Every command is an argv (never a shell string), runs with `LC_ALL=C` so that
tool output parses the same everywhere, has a timeout, is logged with its
secrets redacted, and on failure raises `CommandError` carrying the site, the
redacted argv, the exit code and the tail of stderr. Implementations: `local`
(subprocess) and `ssh` (the OpenSSH client).
"""

from remirror.runner.base import Completed, Runner, redact

__all__ = ["Completed", "Runner", "redact"]
