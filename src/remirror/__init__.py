"""remirror: mirror disks to a second site with stock Linux parts."""

import time as _time

__version__ = "0.1.0"
# When this process loaded remirror: a module changed on disk since is not the code it runs
# (remirror.agent.compiled_scope files no scope it built then).
LOADED_NS = _time.time_ns()
