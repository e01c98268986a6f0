"""The controller's side of the agent: one object per site, local or over SSH."""

from __future__ import annotations

import json
from typing import Any

from remirror.errors import SiteError
from remirror.profile.model import Site
from remirror.runner.sites import runner_for_site

AGENT_TIMEOUT = 600.0


class AgentClient:
    """Sends requests to a site's agent: in-process for `local`, `remirror agent` over SSH otherwise."""

    def __init__(self, name: str, site: Site) -> None:
        self.name = name
        self.site = site
        self._runner = None if site.is_local else runner_for_site(name, site)

    def request(self, request: dict[str, Any], secrets: list[str] | None = None) -> dict[str, Any]:
        """One request and its answer."""
        if self._runner is None:
            from remirror.agent import handle

            return handle(request)
        done = self._runner.run(
            ["remirror", "agent"], stdin=json.dumps(request), timeout=AGENT_TIMEOUT, secrets=secrets or []
        )
        try:
            answer: dict[str, Any] = json.loads(done.stdout)
        except json.JSONDecodeError:
            raise SiteError(
                self.name, f"the agent answered something that is not JSON: {done.stdout[:200]!r}"
            ) from None
        if "error" in answer:
            raise SiteError(self.name, f"agent: {answer['error']}")
        return answer

    def observe(self, disks: list[str]) -> dict[str, Any]:
        """This site's raw facts."""
        facts: dict[str, Any] = self.request({"op": "observe", "disks": disks})["facts"]
        return facts

    def run(self, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Run steps; one result per step attempted."""
        secrets = [s for step in steps for s in step.get("secrets", [])]
        results: list[dict[str, Any]] = self.request({"op": "run", "steps": steps}, secrets)["results"]
        return results

    def close(self) -> None:
        """Drop the SSH connection, if any."""
        if self._runner is not None:
            self._runner.close()
