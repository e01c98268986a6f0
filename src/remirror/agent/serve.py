"""`remirror agent [--serve]`: the site's end of the controller's channel.

Without --serve: one request, the whole of stdin. With --serve: one request
per line and one answer per line, until stdin closes, so that a controller
command starts one agent per remote site instead of one per request. Every
controller command starts it on every remote site, so it imports only what
observing and running steps need: no click, no profile models, no planner
(tests/unit/test_layers.py holds it to that).
"""

from __future__ import annotations

import json
import sys

from remirror.errors import EXIT_BAD_INPUT
from remirror.logs import setup_logging

USAGE = "usage: remirror agent [--serve]  (run by the controller over SSH; requests are JSON on stdin)"


def main(args: list[str]) -> int:
    """Answer the requests on stdin; the exit code."""
    if args not in ([], ["--serve"]):
        sys.stderr.write(f"{USAGE}\n" if args in (["-h"], ["--help"]) else f"remirror: {USAGE}\n")
        return 0 if args in (["-h"], ["--help"]) else EXIT_BAD_INPUT
    setup_logging(0, False)
    from remirror.agent import handle

    if not args:
        try:
            request = json.load(sys.stdin)
        except json.JSONDecodeError as error:
            sys.stderr.write(f"remirror: agent: the request is not JSON: {error}\n")
            return EXIT_BAD_INPUT
        sys.stdout.write(json.dumps(handle(request)) + "\n")
        return 0
    for line in sys.stdin:
        try:
            answer = handle(json.loads(line))
        except json.JSONDecodeError as error:
            answer = {"error": f"the request is not JSON: {error}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    return 0
