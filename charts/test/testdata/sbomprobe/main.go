// Command sbomprobe stands for a CCM binary in the release tests' image tarballs: a Go
// binary whose embedded build information (its main module and the modules it links) the
// release's SBOM is read from.
package main

import (
	"fmt"

	"sigs.k8s.io/yaml"
)

func main() {
	out, err := yaml.Marshal(map[string]string{"probe": "sbom"})
	fmt.Print(string(out), err)
}
