//go:build tools

// etcd for the suite's API server (tests/support/k8s/builds.py builds it); this file only keeps
// `go mod tidy` from dropping its requirements.
package etcd

import (
	_ "go.etcd.io/etcd/server/v3"
)
