"""Allow `python -m remirror`."""

from remirror.cli import main

main()
