//go:build tools

// containerd 2.x as a node runs it (tests/support/k8s/builds.py builds these); this file only
// keeps `go mod tidy` from dropping their requirements.
package containerd

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
