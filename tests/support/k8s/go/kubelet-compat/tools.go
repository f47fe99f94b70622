//go:build tools

// An older kubelet for the device-plugin tests (tests/support/k8s/builds.py builds it); this file
// only keeps `go mod tidy` from dropping its requirements.
package kubeletcompat

import (
	_ "k8s.io/kubernetes/cmd/kubelet"
)
