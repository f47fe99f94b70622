"""The suite's one-node Kubernetes cluster: builds (builds.py), certificates (pki.py), the
cluster (cluster.py) and what the tests run on it (nodekit.py)."""
