"""The side-effect gateway: the one way remirror runs a command on a site.

Every command is an argv (never a shell string), runs with `LC_ALL=C` so that
tool output parses the same everywhere, has a timeout, is logged with its
secrets redacted, and on failure raises `CommandError` carrying the site, the
redacted argv, the exit code and the tail of stderr. Implementations: `local`
(subprocess), `ssh` (paramiko), `fake` (scripted, for unit tests).
"""

from remirror.profile.model import Site, SshOptions
from remirror.runner.base import Completed, Runner, redact

__all__ = ["Completed", "Runner", "redact", "runner_for_site"]


def runner_for_site(name: str, site: Site) -> Runner:
    """The runner that reaches a profile site: local, or SSH with its options."""
    if site.is_local:
        from remirror.runner.local import LocalRunner

        return LocalRunner(name)
    from remirror.runner.ssh import SshRunner

    address = site.ssh_address
    options = site.ssh or SshOptions()
    return SshRunner(
        name,
        host=address.host,
        port=address.port,
        user=address.user,
        identity_file=options.identity_file,
        known_hosts=options.known_hosts,
        connect_timeout=options.connect_timeout,
    )
