// Command release assembles a cloudgate release directory (make release): the chart
// packaged with Helm's Go SDK at the release's version, make image's multi-arch OCI
// tarballs (checked to be tagged with that version), the release notes (the CHANGELOG section
// and each image index's digest), each image's CycloneDX SBOM and, with -key, the cosign
// signature of each index digest, the SBOMs' attestations and the public key, and SHA256SUMS.
// Run it in charts/test:
//
//	COSIGN_PASSWORD=... go run ./cmd/release -version v0.2.0 -images ../../_out -key cosign.key -out ../../_out/release/v0.2.0
//
// With -push REGISTRY it publishes a release directory written before (make release-push):
// the images to REGISTRY/NAME:vX.Y.Z and the chart to oci://REGISTRY/charts/cloudgate.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cloudgate/cloudgate/charts/test"
)

func main() {
	o := test.ReleaseOptions{}
	flag.StringVar(&o.Version, "version", "", "the release, vX.Y.Z (the image tag and the chart's appVersion)")
	flag.StringVar(&o.ChartDir, "chart", "../cloudgate", "the chart's directory")
	flag.StringVar(&o.Changelog, "changelog", "../../CHANGELOG.md", "the changelog the release notes come from")
	flag.StringVar(&o.ImagesDir, "images", "", "the directory make image wrote its OCI tarballs to (empty: chart, notes and checksums only)")
	flag.StringVar(&o.Out, "out", "", "the release directory to write (must not exist or be empty)")
	epoch := flag.String("source-date-epoch", "0", "the chart archive's file times, in Unix seconds (make passes the commit's)")
	push := flag.String("push", "", "publish the release directory -out to this registry, HOST[:PORT][/PATH], instead of writing it")
	plainHTTP := flag.Bool("plain-http", false, "with -push: the registry talks HTTP, not HTTPS")
	key := flag.String("key", "", "sign the images with this ECDSA P-256 PEM private key (cosign generate-key-pair's, decrypted with $COSIGN_PASSWORD, or an unencrypted one)")
	flag.Parse()
	if *push != "" {
		pub, err := test.PublishRelease(test.PublishOptions{Dir: o.Out, Registry: *push, PlainHTTP: *plainHTTP})
		if err != nil {
			fmt.Fprintln(os.Stderr, "release:", err)
			os.Exit(1)
		}
		fmt.Printf("chart: %s --version %s (manifest %s)\n", pub.Chart, pub.ChartVersion, pub.ChartManifest)
		for _, name := range test.ReleaseImages {
			if ref, ok := pub.Images[name]; ok {
				fmt.Printf("image: %s (attached: %s)\n", ref, strings.Join(pub.Attached[name], ", "))
			}
		}
		return
	}
	sec, err := strconv.ParseInt(*epoch, 10, 64)
	if err != nil || o.Out == "" {
		fmt.Fprintln(os.Stderr, "release: want -out DIR and -source-date-epoch SECONDS")
		os.Exit(2)
	}
	o.Created = time.Unix(sec, 0)
	if *key != "" {
		if o.Signer, err = test.LoadSigningKey(*key, []byte(os.Getenv("COSIGN_PASSWORD"))); err != nil {
			fmt.Fprintln(os.Stderr, "release:", err)
			os.Exit(1)
		}
	}
	files, err := test.PackageRelease(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
	for _, f := range files {
		fmt.Println(filepath.Join(o.Out, f))
	}
}
