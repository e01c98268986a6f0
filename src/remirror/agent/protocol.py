"""The version of the controller-agent protocol (remirror.agent), in every answer.

Bumped when a request or an answer changes meaning: 2 added the site locks
(`lock`, `unlock`), without which a controller cannot keep another from
changing a site under it; 3 made `save_ranges` take a name (`save`) where it
took a directory (`dir`), and a remote controller's lock only the `site` one; 4 read every
step by the typed catalogue (remirror.protocol), with no `run` step: each command a class whose
argv the site builds; 5 made a remote lock a lease (the agent ends after so long without a
request, and a controller of 4 sends no keepalive); 6 made a `cdp` request's `keep` a
retention grid (`{all, hourly, daily, weekly}` seconds), added `hooks` to it and each point's
`hooks` outcome, the point times to what `observe` reports of an index (`ids`, `times`), the
site's `clock` to `observe`, and `system` as a resync limit's value; 7 added the site's
`seeds` to `observe`, `raw` to `digest` (from the disk's byte 0, no array over it yet) and
the `copy_spans` step (a seed's catch-up, remirror.agent.seed); 8 added `safe_mode_delay` to
what `observe` reads of an array and to the md attributes a step may set (remirror.plan.safe_mode).
The controller refuses an agent of another version with one line naming both
(remirror.agent.client).
"""

PROTOCOL_VERSION = 8
