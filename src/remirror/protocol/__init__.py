"""The protocol between a controller and a site's agent: one typed catalogue. Pure.

Each operation a controller may ask of a site's agent is one class of
`remirror.protocol.steps`, with typed fields. The planner builds them; the
controller sends them as JSON (`Step.as_dict`); the agent reads the JSON back
into the same class (`decode`), strictly: an unknown kind or field, a field
missing, or a value of another type is refused before any check or handler
sees it. The agent's policy (remirror.agent.policy_steps) checks the typed
step against the site's scope, and its handler (remirror.agent.steps) builds
every argv, table and path at the site from the typed fields. The unit
tests' simulated sites read the same classes: no description of the
protocol can drift from another.
"""

from remirror.protocol.steps import CATALOGUE, decode
from remirror.protocol.wire import Step, WireError

__all__ = ["CATALOGUE", "Step", "WireError", "decode"]
