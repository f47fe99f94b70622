// The Go toolchain the suite builds with where the machine's Go is older than a pin needs
// (Debian 12's golang-go is 1.19, Debian 13's 1.24): the module golang.org/toolchain, the
// one GOTOOLCHAIN=go1.x.y switches to, fetched from the Go module proxy with the machine's
// Go (`go mod download` of it works with any Go that has modules) and checked against this
// go.sum, one pair of lines per architecture (tests/support/upstream.py: toolchain()).
// Nothing here is built.  The `go` line stays at the oldest Go that must run here.
//
// To move it: for arch in amd64 arm64, `go mod download -json
// golang.org/toolchain@v0.0.1-go1.X.Y.linux-$arch` and put its Sum and GoModSum in go.sum.
module xpu-cdi.test/gotoolchain

go 1.19
