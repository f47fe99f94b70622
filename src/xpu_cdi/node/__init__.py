"""What the node daemons (device plugin, DRA driver, exporter, labeller) and doctor share.

The cards the CDI specs on disk define (:mod:`.inventory`) and their health
(:mod:`.health`); the daemons' loop (:mod:`.loop`: signals, the wait on inotify
and uevents (:mod:`.uevents`, which ``watch`` reads too), the status file, one
``refresh()`` of the inventory) and status files
(:mod:`.status`); one way per kind (:mod:`.servemode`); kubelet's gRPC APIs
from field tables (:mod:`.protobuild`) and the unix-socket gRPC server
(:mod:`.grpcserve`); what the exporter and doctor read of the daemons' own: the DRA
driver's prepared claims (:mod:`.checkpoint`) and claim-scoped specs (:mod:`.claimspec`), the
device plugin's time-slicing replica IDs (:mod:`.sharing`), the vendor's partitioning tool
(:mod:`.vnpu`, which the DRA driver, the device plugin and doctor run).
Below the daemons, above ``generate/`` and ``cdi/``:
nothing here imports a daemon's package.
"""
