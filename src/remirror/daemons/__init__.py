"""Site daemons: long-running loops that act on the host they run on, never across the link.

`destage` writes a cache back once its device has been idle (the DCD's
destage-when-idle), `cdp` takes and prunes recovery points. Both run on the
site itself under systemd (contrib/systemd/), because what they do must not
wait on a WAN. The reconciler, which works across sites through the
controller, is remirror.reconcile.
"""
