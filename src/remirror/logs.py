"""Where remirror logs: stderr, one prefix, a level chosen on the command line."""

from __future__ import annotations

import logging
import sys


def setup_logging(verbose: int, debug: bool) -> None:
    """Logs to stderr: warnings by default, -v info, --debug everything."""
    level = logging.DEBUG if debug else logging.INFO if verbose else logging.WARNING
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("remirror: %(levelname)s: %(message)s"))
    root = logging.getLogger("remirror")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
