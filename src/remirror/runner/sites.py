"""The runner for a profile site: local, or SSH with the site's options."""

from __future__ import annotations

from remirror.profile.model import Site, SshOptions
from remirror.profile.types import parse_ssh_address
from remirror.runner.base import Runner


def runner_for_site(name: str, site: Site) -> Runner:
    """The runner that reaches a profile site."""
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
        jump=parse_ssh_address(options.proxy_jump) if options.proxy_jump else None,
    )
