//go:build tools

// helm, for the chart's tests (tests/support/k8s/builds.py builds it); this file only keeps
// `go mod tidy` from dropping its requirements.
package helm

import (
	_ "helm.sh/helm/v4/cmd/helm"
)
