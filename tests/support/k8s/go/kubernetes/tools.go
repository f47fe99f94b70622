//go:build tools

// The upstream commands the suite's one-node cluster runs (tests/support/k8s/builds.py builds
// them); this file only keeps `go mod tidy` from dropping their requirements.
package kubernetes

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
