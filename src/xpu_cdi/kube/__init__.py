"""The Kubernetes API client the node daemons share (the DRA driver, the labeller).

:mod:`.client` -- the API server over a urllib3 pool, JSON bodies as plain dicts: the
service account or a kubeconfig, client-go's rate and ``Retry-After``, the proxy variables.
"""
