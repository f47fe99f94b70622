"""Host set-up of nodes without the package (the DaemonSet's init containers):
the compiled binaries installed into a host directory (:mod:`.install`) and
the optional runtime wiring (:mod:`.wiring`)."""
