package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeBuild builds an index of two small stand-in binaries into dir/out.tar; the binaries'
// and the CA bundle's file times are set to mtime (which must not reach the output).
func fakeBuild(t *testing.T, dir string, created, mtime time.Time) string {
	t.Helper()
	o := Options{Out: filepath.Join(dir, "out.tar"), Ref: "cloudgate:v0.0.0-test", Title: "t",
		Version: "v0.0.0-test", Revision: "abc", Created: created, Source: "s",
		CACerts: filepath.Join(dir, "ca.crt")}
	if err := os.WriteFile(o.CACerts, []byte("-----BEGIN CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	files := []string{o.CACerts}
	for _, arch := range []string{"amd64", "arm64"} {
		p := filepath.Join(dir, "ccm-"+arch)
		if err := os.WriteFile(p, []byte("binary for "+arch), 0o700); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
		o.Binaries = append(o.Binaries, Binary{Arch: arch, Path: p})
	}
	for _, f := range files {
		if err := os.Chtimes(f, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	if err := Build(o); err != nil {
		t.Fatal(err)
	}
	return o.Out
}

// TestReproducible: the same inputs give the same tarball bytes (so the same index digest)
// even with other file times, another temporary directory and another umask; every time in
// the output — the tarball's entries, each layer's entries, the config's created, its
// history — is the -created time. A build stamping "now" anywhere fails here.
func TestReproducible(t *testing.T) {
	created := time.Date(2026, 11, 25, 20, 0, 0, 0, time.UTC)
	a := fakeBuild(t, t.TempDir(), created, time.Now())
	t.Setenv("TMPDIR", t.TempDir())
	old := setUmask(0o077)
	b := fakeBuild(t, t.TempDir(), created, time.Now().Add(-time.Hour))
	setUmask(old)
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if !bytes.Equal(ab, bb) {
		t.Errorf("two builds of the same inputs differ (%d vs %d bytes)", len(ab), len(bb))
	}
	da, db := indexDigest(t, a), indexDigest(t, b)
	if da != db {
		t.Errorf("index digests differ: %s vs %s", da, db)
	}

	// Every timestamp is the build time.
	tr := tar.NewReader(bytes.NewReader(ab))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(created) || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("tarball entry %s: mtime %v owner %d:%d, want %v 0:0", h.Name, h.ModTime, h.Uid, h.Gid, created)
		}
	}
	for arch, img := range images(t, a) {
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if !cf.Created.Time.Equal(created) {
			t.Errorf("%s: config created %v, want %v", arch, cf.Created.Time, created)
		}
		for _, h := range cf.History {
			if !h.Created.Time.IsZero() && !h.Created.Time.Equal(created) {
				t.Errorf("%s: history created %v, want %v or none", arch, h.Created.Time, created)
			}
		}
		layers, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range layers {
			rc, err := l.Uncompressed()
			if err != nil {
				t.Fatal(err)
			}
			ltr := tar.NewReader(rc)
			for {
				h, err := ltr.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if !h.ModTime.Equal(created) {
					t.Errorf("%s: layer entry %s mtime %v, want %v", arch, h.Name, h.ModTime, created)
				}
			}
			rc.Close()
		}
	}

	// Another build time is another digest: the digest does depend on it.
	if c := fakeBuild(t, t.TempDir(), created.Add(time.Second), time.Now()); indexDigest(t, c) == da {
		t.Error("a different -created gave the same digest")
	}
}

// TestIndexPlatforms: one image per -binary, each with its platform in the index and its
// config, and its own binary at the entrypoint.
func TestIndexPlatforms(t *testing.T) {
	out := fakeBuild(t, t.TempDir(), time.Unix(1764100000, 0).UTC(), time.Now())
	imgs := images(t, out)
	if len(imgs) != 2 {
		t.Fatalf("index holds %d images, want amd64 and arm64", len(imgs))
	}
	for _, arch := range []string{"amd64", "arm64"} {
		img, ok := imgs[arch]
		if !ok {
			t.Fatalf("no linux/%s image", arch)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != "linux" || cf.Architecture != arch {
			t.Errorf("linux/%s image config says %s/%s", arch, cf.OS, cf.Architecture)
		}
		if got := string(extract(t, img)[strings.TrimPrefix(Entrypoint, "/")].data); got != "binary for "+arch {
			t.Errorf("linux/%s image runs %q", arch, got)
		}
	}
}

// TestCreatedTime: the build time comes from -created or SOURCE_DATE_EPOCH, never from the
// clock; without either the tool refuses.
func TestCreatedTime(t *testing.T) {
	for _, tc := range []struct {
		created, epoch string
		want           time.Time
		err            string
	}{
		{"2026-11-25T20:00:00Z", "1", time.Date(2026, 11, 25, 20, 0, 0, 0, time.UTC), ""},
		{"", "1764100800", time.Unix(1764100800, 0).UTC(), ""},
		{"", "", time.Time{}, "SOURCE_DATE_EPOCH"},
		{"", "yesterday", time.Time{}, "SOURCE_DATE_EPOCH"},
		{"25 Nov", "", time.Time{}, "RFC 3339"},
	} {
		got, err := createdTime(tc.created, tc.epoch)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("createdTime(%q, %q) = %v, %v; want an error naming %s", tc.created, tc.epoch, got, err, tc.err)
			}
			continue
		}
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("createdTime(%q, %q) = %v, %v; want %v", tc.created, tc.epoch, got, err, tc.want)
		}
	}
	if err := Build(Options{Binaries: []Binary{{"amd64", "x"}}, Out: "x", Version: "v"}); err == nil {
		t.Error("Build without a build time: no error")
	}
}
