//go:build tools

// Prometheus for the suite's fleet (tests/fleet/test_fleet_prometheus.py): Debian's package is
// built without Kubernetes service discovery, which deploy/monitoring's scrape job uses.
// tests/support/k8s/builds.py builds it; this file only keeps `go mod tidy` from dropping its
// requirements.
package prometheus

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
