//go:build tools

// kube-proxy for the suite's fleet (tests/support/k8s/builds.py builds it, at the kubernetes
// component's pin); this file only keeps `go mod tidy` from dropping its requirements.
package kubeproxy

import (
	_ "k8s.io/kubernetes/cmd/kube-proxy"
)
