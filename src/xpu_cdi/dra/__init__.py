"""``xpu-cdi dra-driver``: the node half of Dynamic Resource Allocation (``resource.k8s.io/v1``).

One driver per CDI kind (driver name = the CDI vendor, ``kunlunxin.com``):

* :mod:`.slices` -- the node's cards as ResourceSlices (pure);
* :mod:`.publisher` -- keeps them published: generation bumps, republished
  after kubelet deletes them, withdrawn on shutdown;
* :mod:`.claims` -- a ResourceClaim's allocation to CDI device names (pure);
* :mod:`xpu_cdi.node.checkpoint` (the exporter and doctor read it too) -- the prepared claims,
  atomic and keyed to the boot;
* :mod:`.server`, :mod:`.registration` -- kubelet's gRPC side (DRAPlugin v1
  and v1beta1, DRAResourceHealth, the plugin watcher's Registration);
* :mod:`xpu_cdi.kube.client` (shared with the labeller) -- the API server;
* :mod:`.state` -- what one driver prepared: its claims and checkpoint, prepare and unprepare;
* :mod:`.daemon`, :mod:`.config`, :mod:`.command` -- the loop and the daemon.

Only the daemon's modules import grpcio, protobuf and the Kubernetes client.
"""
