package test

import (
	"archive/tar"
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/registry"
)

// writeImageTarball writes an OCI layout tarball shaped as make image writes it (one image
// index tagged NAME:VERSION, a linux/amd64 and a linux/arm64 image, the version label on the
// index) with random layers, so that the release path runs without building the CCMs.
func writeImageTarball(t *testing.T, file, imageName, version string) {
	t.Helper()
	var adds []mutate.IndexAddendum
	for _, arch := range []string{"amd64", "arm64"} {
		img, err := random.Image(512, 1)
		if err != nil {
			t.Fatal(err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	idx := mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), types.OCIImageIndex)
	idx = mutate.Annotations(idx, map[string]string{"org.opencontainers.image.version": version}).(v1.ImageIndex)
	dir := t.TempDir()
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": imageName + ":" + version})); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	if err := tw.AddFS(os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPublishRelease: a release (PackageRelease, with image tarballs shaped as make image's)
// pushed by PublishRelease to an OCI registry the test starts on 127.0.0.1
// (go-containerregistry's), then pulled back as a user would: the chart by version with Helm's
// registry client (oci://127.0.0.1:PORT/charts/cloudgate), byte for byte the packaged archive,
// its runbook links at the release's tag; and each image by the index digest the release notes
// give, with the same digest and the same per-platform images as the tarball. Under make
// (CLOUDGATE_RELEASE_IMAGES and CLOUDGATE_RELEASE_VERSION) the images are make image's own.
func TestPublishRelease(t *testing.T) {
	version, images := os.Getenv("CLOUDGATE_RELEASE_VERSION"), os.Getenv("CLOUDGATE_RELEASE_IMAGES")
	if images == "" || version == "" {
		version, images = "v0.0.0-test", t.TempDir()
		for _, img := range ReleaseImages {
			writeImageTarball(t, filepath.Join(images, img+".oci.tar"), img, version)
		}
	}
	chartVersion := strings.TrimPrefix(version, "v")
	rel := filepath.Join(t.TempDir(), "release")
	if _, err := PackageRelease(ReleaseOptions{Version: version, ChartDir: chartDir, Changelog: "../../CHANGELOG.md",
		ImagesDir: images, Out: rel, Created: time.Unix(0, 0)}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	if !strings.HasPrefix(host, "127.0.0.1:") {
		t.Fatalf("the registry listens on %s, want 127.0.0.1", host)
	}
	pub, err := PublishRelease(PublishOptions{Dir: rel, Registry: host, PlainHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := "oci://" + host + "/charts/cloudgate"; pub.Chart != want || pub.ChartVersion != chartVersion {
		t.Errorf("published the chart as %s --version %s, want %s --version %s", pub.Chart, pub.ChartVersion, want, chartVersion)
	}

	// The chart, by version, with a new client (nothing cached from the push).
	client, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptWriter(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := client.Pull(strings.TrimPrefix(pub.Chart, "oci://") + ":" + pub.ChartVersion)
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(rel, "cloudgate-"+chartVersion+".tgz")
	want, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	sums, err := ReadChecksums(filepath.Join(rel, ChecksumsFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pulled.Chart.Data, want) || pulled.Chart.Digest != "sha256:"+sums[filepath.Base(archive)] {
		t.Errorf("pulled chart: %d bytes, digest %s; released %s: %d bytes, sha256 %s", len(pulled.Chart.Data), pulled.Chart.Digest,
			archive, len(want), sums[filepath.Base(archive)])
	}
	if pulled.Manifest.Digest != pub.ChartManifest {
		t.Errorf("pulled the chart manifest %s, pushed %s", pulled.Manifest.Digest, pub.ChartManifest)
	}
	ch, err := loader.LoadArchive(bytes.NewReader(pulled.Chart.Data))
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.AppVersion != version {
		t.Errorf("pulled chart's appVersion %s, want %s", ch.Metadata.AppVersion, version)
	}
	for _, f := range ch.Files {
		if bytes.Contains(f.Data, []byte("/blob/main/")) {
			t.Errorf("pulled chart's %s links into main, not %s", f.Name, version)
		}
	}

	// Each image, by the digest the release notes give.
	notes, err := os.ReadFile(filepath.Join(rel, ReleaseNotesFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range ReleaseImages {
		file := filepath.Join(rel, img+"-"+version+".oci.tar")
		local, err := ReadOCIImage(file)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile("\\| `" + regexp.QuoteMeta(img+":"+version) + "` \\| `[^`]+` \\| `(sha256:[a-f0-9]{64})` \\|").FindSubmatch(notes)
		if m == nil {
			t.Fatalf("%s gives no index digest for %s:\n%s", ReleaseNotesFile, img, notes)
		}
		digest := string(m[1])
		if digest != local.Digest || pub.Images[img] != host+"/"+img+"@"+digest {
			t.Errorf("%s: notes give %s, the tarball's index is %s, published as %s", img, digest, local.Digest, pub.Images[img])
		}
		ref, err := name.NewDigest(host+"/"+img+"@"+digest, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := remote.Index(ref)
		if err != nil {
			t.Fatalf("pulling %s by digest: %v", ref, err)
		}
		got, err := idx.Digest()
		if err != nil {
			t.Fatal(err)
		}
		im, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		var platforms []string
		for _, d := range im.Manifests {
			platforms = append(platforms, d.Platform.String())
			if _, err := idx.Image(d.Digest); err != nil {
				t.Errorf("%s: image %s (%s): %v", ref, d.Digest, d.Platform, err)
			}
		}
		if got.String() != digest || strings.Join(platforms, " ") != strings.Join(local.Platforms, " ") {
			t.Errorf("pulled %s: digest %s, platforms %v; released %s, %v", ref, got, platforms, digest, local.Platforms)
		}
		// And by tag, as skopeo copy would have tagged it: the same index.
		tagged, err := remote.Index(ref.Context().Tag(version))
		if err != nil {
			t.Fatal(err)
		}
		if d, _ := tagged.Digest(); d.String() != digest {
			t.Errorf("%s:%s is %s, the release's index is %s", ref.Context(), version, d, digest)
		}
	}
}
