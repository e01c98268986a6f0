"""The hosts' lab: each site its own QEMU VM with Debian's kernel, systemd and a persistent disk.

What the single-VM lab (remirror.lab) cannot show: boots, power cuts, units that start by
themselves, a DR site that is a machine of its own. Modules: `image` (builds the cached
Debian image), `machine` (one host: boot, power cut, run a command), `lab` (hosts joined by
links, remirror installed on each as a site installs it), `writer` (runs on a host: records
what was acknowledged). docs/lab.md, "The hosts' lab".
"""
