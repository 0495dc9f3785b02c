package main

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// TestImages checks the OCI layout tarballs `make image` wrote (CLOUDGATE_IMAGE_DIR, with
// the version it stamped in CLOUDGATE_IMAGE_VERSION): each loads as an OCI image whose
// config runs /cloud-controller-manager as 65532:65532 with the org.opencontainers.image.*
// labels; its filesystem holds /etc/passwd with the nonroot user and the CA bundle; and the
// binary extracted from it runs --version printing the stamped version.
func TestImages(t *testing.T) {
	dir, version := os.Getenv("CLOUDGATE_IMAGE_DIR"), os.Getenv("CLOUDGATE_IMAGE_VERSION")
	if dir == "" || version == "" {
		msg := "CLOUDGATE_IMAGE_DIR and CLOUDGATE_IMAGE_VERSION are not set: run `make test-image`, which builds the images first"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	for _, name := range []string{"cloudgate-ccm", "cloudgate-aws-ccm"} {
		t.Run(name, func(t *testing.T) {
			img := loadLayoutTar(t, filepath.Join(dir, name+".oci.tar"))
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.Config.User != "65532:65532" {
				t.Errorf("user = %q, want 65532:65532 (non-root)", cf.Config.User)
			}
			if got := strings.Join(cf.Config.Entrypoint, " "); got != Entrypoint {
				t.Errorf("entrypoint = %q, want %q", got, Entrypoint)
			}
			if cf.OS != "linux" || cf.Architecture == "" {
				t.Errorf("platform = %s/%s, want linux/ARCH", cf.OS, cf.Architecture)
			}
			for _, k := range []string{"title", "version", "revision", "created", "source", "licenses"} {
				if cf.Config.Labels["org.opencontainers.image."+k] == "" {
					t.Errorf("label org.opencontainers.image.%s is missing", k)
				}
			}
			if got := cf.Config.Labels["org.opencontainers.image.version"]; got != version {
				t.Errorf("version label = %q, want %q", got, version)
			}
			files := extract(t, img)
			if !strings.Contains(string(files["etc/passwd"].data), "nonroot:x:65532:65532:") {
				t.Errorf("/etc/passwd lacks the nonroot user 65532: %q", files["etc/passwd"].data)
			}
			if !strings.Contains(string(files["etc/ssl/certs/ca-certificates.crt"].data), "BEGIN CERTIFICATE") {
				t.Error("/etc/ssl/certs/ca-certificates.crt holds no certificate")
			}
			bin, ok := files[strings.TrimPrefix(Entrypoint, "/")]
			if !ok {
				t.Fatalf("%s is not in the image", Entrypoint)
			}
			if bin.mode&0o111 == 0 {
				t.Errorf("%s mode %o is not executable", Entrypoint, bin.mode)
			}
			path := filepath.Join(t.TempDir(), "ccm")
			if err := os.WriteFile(path, bin.data, 0o755); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(path, "--version").CombinedOutput()
			if err != nil {
				t.Fatalf("%s --version: %v\n%s", Entrypoint, err, out)
			}
			if want := "Kubernetes " + version; strings.TrimSpace(string(out)) != want {
				t.Errorf("--version printed %q, want %q", strings.TrimSpace(string(out)), want)
			}
			// Static: no ELF interpreter (a dynamically linked binary would not start on a
			// base image without libc).
			if strings.Contains(string(bin.data[:min(len(bin.data), 4096)]), "/lib64/ld-linux") {
				t.Error("the binary is dynamically linked; build with CGO_ENABLED=0")
			}
		})
	}
}

// loadLayoutTar unpacks an OCI layout tarball and returns its one image.
func loadLayoutTar(t *testing.T, path string) v1.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(dst, dir) {
			t.Fatalf("tar entry %q escapes the layout", h.Name)
		}
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(dst, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("%s is not an OCI layout: %v", path, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 {
		t.Fatalf("%s: index has %d manifests, want 1", path, len(m.Manifests))
	}
	if m.Manifests[0].Annotations["org.opencontainers.image.ref.name"] == "" {
		t.Errorf("%s: index entry has no org.opencontainers.image.ref.name", path)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

type entry struct {
	data []byte
	mode int64
}

// extract flattens the image's layers and returns its regular files.
func extract(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]entry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimPrefix(h.Name, "/")] = entry{data: b, mode: h.Mode}
	}
}
