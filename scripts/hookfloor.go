// The Go floor of `make bench`: what a minimal OCI hook written in Go costs
// before it does any work.  It reads the OCI state on stdin and the bundle's
// config.json, decodes the fields a device hook looks at (as the runtime-spec
// types would, with encoding/json), and exits.  Standard library only; built
// by scripts/bench.py with the machine's Go.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

type state struct {
	OCIVersion  string            `json:"ociVersion"`
	ID          string            `json:"id"`
	Status      string            `json:"status"`
	Pid         int               `json:"pid"`
	Bundle      string            `json:"bundle"`
	Annotations map[string]string `json:"annotations"`
}

type config struct {
	Process *struct {
		Env          []string `json:"env"`
		Capabilities *struct {
			Bounding []string `json:"bounding"`
		} `json:"capabilities"`
	} `json:"process"`
	Root *struct {
		Path string `json:"path"`
	} `json:"root"`
	Annotations map[string]string `json:"annotations"`
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "hookfloor:", err)
	os.Exit(1)
}

func main() {
	var s state
	if err := json.NewDecoder(os.Stdin).Decode(&s); err != nil {
		fail(err)
	}
	data, err := os.ReadFile(filepath.Join(s.Bundle, "config.json"))
	if err != nil {
		fail(err)
	}
	var c config
	if err := json.Unmarshal(data, &c); err != nil {
		fail(err)
	}
	if c.Root == nil || c.Root.Path == "" {
		fail(fmt.Errorf("%s: no root.path", s.Bundle))
	}
}
