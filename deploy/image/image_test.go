package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// TestImages checks the OCI layout tarballs `make image` wrote (CLOUDGATE_IMAGE_DIR, with
// the version and commit it stamped in CLOUDGATE_IMAGE_VERSION and CLOUDGATE_IMAGE_COMMIT):
// each holds an image index with one linux image per architecture of CLOUDGATE_IMAGE_ARCHS
// (default "amd64 arm64"); each image's config runs /cloud-controller-manager as
// 65532:65532 with the org.opencontainers.image.* labels; its filesystem holds /etc/passwd
// with the nonroot user and the CA bundle; its binary is a static ELF for that architecture;
// and the binary of this machine's architecture runs --version printing the stamped version
// and commit and the linked module versions of its go.mod.
func TestImages(t *testing.T) {
	dir, version, commit := os.Getenv("CLOUDGATE_IMAGE_DIR"), os.Getenv("CLOUDGATE_IMAGE_VERSION"), os.Getenv("CLOUDGATE_IMAGE_COMMIT")
	if dir == "" || version == "" || commit == "" {
		msg := "CLOUDGATE_IMAGE_DIR, CLOUDGATE_IMAGE_VERSION and CLOUDGATE_IMAGE_COMMIT are not set: run `make test-image`, which builds the images first"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	archs := strings.Fields(os.Getenv("CLOUDGATE_IMAGE_ARCHS"))
	if len(archs) == 0 {
		archs = []string{"amd64", "arm64"}
	}
	ranHost := false
	for _, tc := range []struct{ name, gomod, provider string }{
		{"cloudgate-ccm", "../../bench/go.mod", ""}, // the simcloud CCM, built in the bench module
		{"cloudgate-aws-ccm", "../../providers/aws/go.mod", "k8s.io/cloud-provider-aws"},
		{"cloudgate-gce-ccm", "../../providers/gce/go.mod", "k8s.io/cloud-provider-gcp/providers"},
	} {
		imgs := images(t, filepath.Join(dir, tc.name+".oci.tar"))
		// The name inside the tarball is the one the docs push (skopeo copy ... REGISTRY/NAME:TAG).
		if d, _ := loadLayoutTar(t, filepath.Join(dir, tc.name+".oci.tar")); d.Annotations["org.opencontainers.image.ref.name"] != tc.name+":"+version {
			t.Errorf("%s: ref.name %q, want %s:%s", tc.name, d.Annotations["org.opencontainers.image.ref.name"], tc.name, version)
		}
		if len(imgs) != len(archs) {
			t.Errorf("%s: index has %d images, want %d (%v)", tc.name, len(imgs), len(archs), archs)
		}
		for _, arch := range archs {
			t.Run(tc.name+"/"+arch, func(t *testing.T) {
				img, ok := imgs[arch]
				if !ok {
					t.Fatalf("no linux/%s image in the index", arch)
				}
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
				if cf.OS != "linux" || cf.Architecture != arch {
					t.Errorf("platform = %s/%s, want linux/%s", cf.OS, cf.Architecture, arch)
				}
				for _, k := range []string{"title", "version", "revision", "created", "source", "licenses"} {
					if cf.Config.Labels["org.opencontainers.image."+k] == "" {
						t.Errorf("label org.opencontainers.image.%s is missing", k)
					}
				}
				if got := cf.Config.Labels["org.opencontainers.image.title"]; got != tc.name {
					t.Errorf("title label = %q, want %q (the name the docs push)", got, tc.name)
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
				checkELF(t, bin.data, arch)
				if arch != runtime.GOARCH {
					return
				}
				ranHost = true
				path := filepath.Join(t.TempDir(), "ccm")
				if err := os.WriteFile(path, bin.data, 0o755); err != nil {
					t.Fatal(err)
				}
				out, err := exec.Command(path, "--version").CombinedOutput()
				if err != nil {
					t.Fatalf("%s --version: %v\n%s", Entrypoint, err, out)
				}
				checkVersion(t, string(out), version, commit, tc.gomod, tc.provider)
			})
		}
	}
	if !ranHost && slices.Contains(archs, runtime.GOARCH) {
		t.Errorf("no binary for this machine (%s) was run", runtime.GOARCH)
	}
}

// checkELF: a static (no ELF interpreter: a dynamically linked binary would not start on a
// base image without libc) Linux executable for arch.
func checkELF(t *testing.T, data []byte, arch string) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("not an ELF binary: %v", err)
	}
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
	if f.Machine != want {
		t.Errorf("ELF machine %v, want %v for %s", f.Machine, want, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary is dynamically linked; build with CGO_ENABLED=0")
		}
	}
}

// checkVersion: --version names cloudgate's stamped version and commit and the module
// versions the binary's go.mod requires (its cloud provider module's too: provider, "" for
// the simcloud binary; never another image's provider), and the control planes client-go
// supports.
func checkVersion(t *testing.T, out, version, commit, gomod, provider string) {
	t.Helper()
	if want := "cloudgate " + version + " (commit " + commit; !strings.HasPrefix(out, want) {
		t.Errorf("--version starts %q, want %q", strings.SplitN(out, "\n", 2)[0], want)
	}
	mods := []string{"k8s.io/cloud-provider", "k8s.io/client-go", "k8s.io/component-base"}
	if provider != "" {
		mods = append(mods, provider)
	}
	for _, other := range []string{"k8s.io/cloud-provider-aws", "k8s.io/cloud-provider-gcp/providers"} {
		if other != provider && strings.Contains(out, other) {
			t.Errorf("--version of a binary without %s names it:\n%s", other, out)
		}
	}
	for _, m := range mods {
		if line := "\n  " + m + " " + required(t, gomod, m) + "\n"; !strings.Contains(out, line) {
			t.Errorf("--version lacks %q:\n%s", strings.TrimSpace(line), out)
		}
	}
	if !strings.Contains(out, "\n  supported control planes: Kubernetes 1.") {
		t.Errorf("--version lacks the supported control planes:\n%s", out)
	}
}

// required returns the version gomod requires of module.
func required(t *testing.T, gomod, module string) string {
	t.Helper()
	b, err := os.ReadFile(gomod)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == module {
			return f[1]
		}
	}
	t.Fatalf("%s does not require %s", gomod, module)
	return ""
}

// TestRebuildSameDigest: a second `make image` of the same commit
// (CLOUDGATE_IMAGE_REBUILD_DIR; make test-image runs it) wrote the same index digest, and the
// same bytes, for each image.
func TestRebuildSameDigest(t *testing.T) {
	dir, again := os.Getenv("CLOUDGATE_IMAGE_DIR"), os.Getenv("CLOUDGATE_IMAGE_REBUILD_DIR")
	if dir == "" || again == "" {
		msg := "CLOUDGATE_IMAGE_DIR and CLOUDGATE_IMAGE_REBUILD_DIR are not set: run `make test-image`, which builds the images twice"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	for _, name := range []string{"cloudgate-ccm", "cloudgate-aws-ccm", "cloudgate-gce-ccm"} {
		a, b := filepath.Join(dir, name+".oci.tar"), filepath.Join(again, name+".oci.tar")
		da, db := indexDigest(t, a), indexDigest(t, b)
		t.Logf("%s: index digest %s (first build), %s (second build)", name, da, db)
		if da != db {
			t.Errorf("%s: two builds of one commit gave the index digests %s and %s", name, da, db)
		}
		ab, err := os.ReadFile(a)
		if err != nil {
			t.Fatal(err)
		}
		bb, err := os.ReadFile(b)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ab, bb) {
			t.Errorf("%s: the two tarballs differ", name)
		}
	}
}

// indexDigest returns the digest of the image index the layout tarball at path names.
func indexDigest(t *testing.T, path string) v1.Hash {
	t.Helper()
	m, _ := loadLayoutTar(t, path)
	return m.Digest
}

// images returns the images of the layout tarball's index by architecture.
func images(t *testing.T, path string) map[string]v1.Image {
	t.Helper()
	d, idx := loadLayoutTar(t, path)
	ii, err := idx.ImageIndex(d.Digest)
	if err != nil {
		t.Fatalf("%s: the layout's entry is not an image index: %v", path, err)
	}
	m, err := ii.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	imgs := map[string]v1.Image{}
	for _, desc := range m.Manifests {
		if desc.Platform == nil || desc.Platform.OS != "linux" {
			t.Errorf("%s: index entry %s has platform %v, want linux/ARCH", path, desc.Digest, desc.Platform)
			continue
		}
		if _, dup := imgs[desc.Platform.Architecture]; dup {
			t.Errorf("%s: two images for %s", path, desc.Platform.Architecture)
		}
		img, err := ii.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		imgs[desc.Platform.Architecture] = img
	}
	return imgs
}

// loadLayoutTar unpacks an OCI layout tarball and returns its one entry (an image index
// with a ref name) and the layout.
func loadLayoutTar(t *testing.T, path string) (v1.Descriptor, v1.ImageIndex) {
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
	return m.Manifests[0], idx
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
