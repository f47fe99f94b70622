//go:build tools

// NVIDIA's CDI hook, the peer make bench times ours against (tests/support/k8s/builds.py builds
// it); this file only keeps `go mod tidy` from dropping its requirements.
package nvidiacdihook

import (
	_ "github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook"
)
