package test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/registry"
)

// probeLayers builds testdata/sbomprobe, a small Go program, for linux/amd64 and
// linux/arm64 (stripped: the build information stays) and returns, per architecture, an image
// layer holding it as /cloud-controller-manager: the stand-ins for the CCM binaries in
// writeImageTarball's images, whose build information the release's SBOMs are read from.
func probeLayers(t *testing.T) map[string]v1.Layer {
	t.Helper()
	dir, layers := t.TempDir(), map[string]v1.Layer{}
	for _, arch := range []string{"amd64", "arm64"} {
		bin := filepath.Join(dir, "sbomprobe-"+arch)
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./testdata/sbomprobe")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build ./testdata/sbomprobe for linux/%s: %v\n%s", arch, err, out)
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		// Compressed once here: the three images share the layer (the race detector makes
		// every gzip pass slow).
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		tw := tar.NewWriter(zw)
		if err := tw.WriteHeader(&tar.Header{Name: "cloud-controller-manager", Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		compressed := gz.Bytes()
		if layers[arch], err = tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(compressed)), nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return layers
}

// writeImageTarball writes an OCI layout tarball shaped as make image writes it (one image
// index tagged NAME:VERSION, a linux/amd64 and a linux/arm64 image, the version and title labels
// on the index, so each image has its own digest, each image's entrypoint /cloud-controller-manager a Go binary: layers[arch], from
// probeLayers), so that the release path runs without building the CCMs.
func writeImageTarball(t *testing.T, file, imageName, version string, layers map[string]v1.Layer) {
	t.Helper()
	var adds []mutate.IndexAddendum
	for _, arch := range []string{"amd64", "arm64"} {
		img, err := mutate.AppendLayers(empty.Image, layers[arch])
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture, cf.Config.Entrypoint = "linux", arch, []string{"/cloud-controller-manager"}
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			t.Fatal(err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	idx := mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), types.OCIImageIndex)
	idx = mutate.Annotations(idx, map[string]string{"org.opencontainers.image.version": version, "org.opencontainers.image.title": imageName}).(v1.ImageIndex)
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
// give, with the same digest and the same per-platform images as the tarball, and its SBOM
// attached beside it (cosign's sha256-HEX.sbom tag). Under make
// (CLOUDGATE_RELEASE_IMAGES and CLOUDGATE_RELEASE_VERSION) the images are make image's own.
func TestPublishRelease(t *testing.T) {
	version, images := releaseImages(t)
	chartVersion := strings.TrimPrefix(version, "v")
	rel := filepath.Join(t.TempDir(), "release")
	if _, err := PackageRelease(ReleaseOptions{Version: version, ChartDir: chartDir, Changelog: "../../CHANGELOG.md",
		ImagesDir: images, Out: rel, Created: time.Unix(0, 0)}); err != nil {
		t.Fatal(err)
	}
	host, pub := publishToTestRegistry(t, rel)
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
		// Its SBOM beside it, as cosign attaches one (this release is not signed: no .sig, .att).
		sbomTag := "sha256-" + strings.TrimPrefix(digest, "sha256:") + ".sbom"
		if !slices.Equal(pub.Attached[img], []string{sbomTag}) {
			t.Errorf("%s: attached %v, want [%s]", img, pub.Attached[img], sbomTag)
		}
		att, err := remote.Image(ref.Context().Tag(sbomTag))
		if err != nil {
			t.Fatal(err)
		}
		layers, err := att.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("%s:%s: %d layers (%v), want one", ref.Context(), sbomTag, len(layers), err)
		}
		if mt, _ := layers[0].MediaType(); mt != SBOMMediaType {
			t.Errorf("%s:%s: layer of media type %s, want %s", ref.Context(), sbomTag, mt, SBOMMediaType)
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		attached, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if want, err := os.ReadFile(filepath.Join(rel, img+"-"+version+SBOMSuffix)); err != nil || !bytes.Equal(attached, want) {
			t.Errorf("%s:%s is not the release's SBOM (%v)", ref.Context(), sbomTag, err)
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

// releaseImages is the release's version and the directory of its image
// tarballs: make image's own under make (CLOUDGATE_RELEASE_VERSION and
// CLOUDGATE_RELEASE_IMAGES), otherwise small test images written here.
func releaseImages(t *testing.T) (version, images string) {
	t.Helper()
	version, images = os.Getenv("CLOUDGATE_RELEASE_VERSION"), os.Getenv("CLOUDGATE_RELEASE_IMAGES")
	if images == "" || version == "" {
		version, images = "v0.0.0-test", t.TempDir()
		layers := probeLayers(t)
		for _, img := range ReleaseImages {
			writeImageTarball(t, filepath.Join(images, img+".oci.tar"), img, version, layers)
		}
	}
	return version, images
}

// publishToTestRegistry starts an OCI registry (go-containerregistry's) on
// 127.0.0.1 for the test's life and pushes the release in rel to it.
func publishToTestRegistry(t *testing.T, rel string) (host string, pub Published) {
	t.Helper()
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host = strings.TrimPrefix(srv.URL, "http://")
	if !strings.HasPrefix(host, "127.0.0.1:") {
		t.Fatalf("the registry listens on %s, want 127.0.0.1", host)
	}
	pub, err := PublishRelease(PublishOptions{Dir: rel, Registry: host, PlainHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	return host, pub
}
