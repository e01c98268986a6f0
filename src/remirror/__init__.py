"""remirror: mirror disks to a second site with stock Linux parts."""

__version__ = "0.1.0"
