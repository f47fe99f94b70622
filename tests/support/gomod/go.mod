// The upstream definitions the tests read, at pinned versions: `go mod download` fetches
// them from the Go module proxy into the test cache (tests/support/upstream.py); go.sum
// holds their checksums, so a module whose bits changed fails instead of being used.
// Nothing here is built: this module has no Go code.
//
// k8s.io/kubelet  pkg/apis/{deviceplugin/v1beta1,pluginregistration/v1,dra/v1,dra/v1beta1,
//                 dra-health/v1alpha1,dra-health/v1,podresources/v1}/api.proto
// k8s.io/cri-api  pkg/apis/runtime/v1/api.proto (the CRI)
//
// tags.cncf.io/container-device-interface  schema/{schema.json,defs.json,testdata/}: the
// CDI JSON schema.  Its own module tags.cncf.io/container-device-interface/schema is not
// served by the proxy (v0.1.0: 403 "This module version is not available"; v1.x: 404),
// and the main module stopped carrying schema/ at v1.0.0, so the newest schema to be had
// is v0.8.1's: the spec format up to cdiVersion 0.8.0 (no netDevices, no 1.1.0 intelRdt
// fields; generate writes neither).  go.sum also pins v0.6.0, whose schema (no intelRdt,
// no additionalGids) is what runtimes on CDI 0.6 check against; our default 0.5.0
// specs must pass both.
//
// The go line is the newest of theirs (k8s.io/kubelet v0.37.2 asks for 1.26.0): it picks the go
// command that reads them (tests/support/upstream.py: go_for).
module xpu-cdi.test/upstream

go 1.26.0

require (
	k8s.io/cri-api v0.37.2
	k8s.io/kubelet v0.37.2
	tags.cncf.io/container-device-interface v0.8.1
)
