"""Facts: immutable records of what exists on a site, and the pure parsers that build them.

Parsers take the text a tool printed (or a sysfs file held) and never run
anything themselves; the agent gathers the text. Every parser is tested on
outputs recorded in the lab, which name the kernel and tool versions
(tests/unit/fixtures/).
"""
