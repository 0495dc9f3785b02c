// Command image assembles a cloudgate CCM image without a Docker daemon: a multi-arch OCI
// image index (one image per -binary ARCH=PATH, e.g. linux/amd64 and linux/arm64) whose
// layers are made from files (the static binary, the CA certificates, an /etc/passwd and
// /etc/group with the nonroot user 65532), written as an OCI image layout tarball that
// `skopeo copy --all oci-archive:...`, `crane push`, `podman load` and `docker load` accept.
// The layout matches the repository's Dockerfile (a distroless-like static base).
//
// The output is reproducible: every timestamp (layer entries, the image config's created,
// the tarball's own entries) is the -created time, by default SOURCE_DATE_EPOCH (make image
// sets it to the commit's time), never the time of the build; the same binaries give the
// same bytes and so the same digests.
//
// It lives in its own module (deploy/image/go.mod) so go-containerregistry never becomes a
// dependency of cloudgate's core module. `make image` runs it for both CCM binaries.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// NonRootUID is the user the image runs as (distroless's "nonroot").
const NonRootUID = 65532

// Entrypoint is where the binary is installed in the image.
const Entrypoint = "/cloud-controller-manager"

const passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
	"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"

const group = "root:x:0:\nnonroot:x:65532:\n"

// Options describes one multi-arch image.
type Options struct {
	Binaries []Binary // one image per architecture
	CACerts  string   // a PEM bundle, installed as /etc/ssl/certs/ca-certificates.crt
	Out      string   // the OCI layout tarball to write
	Ref      string   // org.opencontainers.image.ref.name, e.g. cloudgate:v0.1.0
	Title    string
	Version  string
	Revision string
	Created  time.Time // every timestamp in the output
	Source   string
}

// Binary is the static CCM binary of one linux architecture.
type Binary struct {
	Arch string // GOARCH: amd64, arm64
	Path string
}

// binaries is the repeatable -binary ARCH=PATH flag.
type binaries []Binary

func (b *binaries) String() string { return fmt.Sprint(*b) }

func (b *binaries) Set(s string) error {
	arch, path, ok := strings.Cut(s, "=")
	if !ok || arch == "" || path == "" {
		return fmt.Errorf("%q: want ARCH=PATH, e.g. arm64=_out/linux_arm64/cloudgate-ccm", s)
	}
	*b = append(*b, Binary{Arch: arch, Path: path})
	return nil
}

// createdTime parses -created (RFC 3339) or, without it, SOURCE_DATE_EPOCH (seconds since
// the epoch, https://reproducible-builds.org/specs/source-date-epoch/). There is no default:
// "now" would give every build a new digest.
func createdTime(created, epoch string) (time.Time, error) {
	if created != "" {
		t, err := time.Parse(time.RFC3339, created)
		if err != nil {
			return time.Time{}, fmt.Errorf("-created %q: not RFC 3339 (e.g. 2026-11-24T17:00:00Z): %w", created, err)
		}
		return t.UTC(), nil
	}
	if epoch == "" {
		return time.Time{}, errors.New("set -created or SOURCE_DATE_EPOCH (the commit's time: git log -1 --format=%ct)")
	}
	n, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since 1970-01-01 UTC", epoch)
	}
	return time.Unix(n, 0).UTC(), nil
}

func main() {
	var o Options
	var created string
	flag.Var((*binaries)(&o.Binaries), "binary", "ARCH=PATH: the static linux/ARCH CCM binary to install as "+Entrypoint+" (repeat per architecture)")
	flag.StringVar(&o.CACerts, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "CA certificate bundle (PEM)")
	flag.StringVar(&o.Out, "out", "", "OCI layout tarball to write")
	flag.StringVar(&o.Ref, "ref", "", "image reference name stored in the layout's index, NAME:TAG (e.g. cloudgate-aws-ccm:v0.1.0)")
	flag.StringVar(&o.Title, "title", "cloudgate-aws-ccm", "org.opencontainers.image.title (the image's name, as the docs push it)")
	flag.StringVar(&o.Version, "version", "", "org.opencontainers.image.version (the stamped gitVersion)")
	flag.StringVar(&o.Revision, "revision", "", "org.opencontainers.image.revision (the git commit)")
	flag.StringVar(&created, "created", "", "build date, RFC 3339 (default: $SOURCE_DATE_EPOCH)")
	flag.StringVar(&o.Source, "source", "https://github.com/cloudgate/cloudgate", "org.opencontainers.image.source")
	flag.Parse()
	t, err := createdTime(created, os.Getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(2)
	}
	o.Created = t
	if err := Build(o); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// Build writes the image index described by o to o.Out: one linux image per binary, in
// the order given.
func Build(o Options) error {
	if len(o.Binaries) == 0 || o.Out == "" || o.Version == "" {
		return errors.New("-binary, -out and -version are required")
	}
	if o.Created.IsZero() {
		return errors.New("no build time: set -created or SOURCE_DATE_EPOCH")
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	seen := map[string]bool{}
	for _, b := range o.Binaries {
		if seen[b.Arch] {
			return fmt.Errorf("-binary: architecture %s given twice", b.Arch)
		}
		seen[b.Arch] = true
		img, err := image(o, b)
		if err != nil {
			return err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: platform(b.Arch)},
		})
	}
	idx = mutate.Annotations(idx, map[string]string{
		"org.opencontainers.image.version":  o.Version,
		"org.opencontainers.image.revision": o.Revision,
		"org.opencontainers.image.created":  o.Created.Format(time.RFC3339),
	}).(v1.ImageIndex)
	return writeLayoutTar(idx, o.Ref, o.Out, o.Created)
}

// platform is the index entry's platform for a GOARCH (arm64 as "v8", as buildx writes it).
func platform(arch string) *v1.Platform {
	p := &v1.Platform{OS: "linux", Architecture: arch}
	if arch == "arm64" {
		p.Variant = "v8"
	}
	return p
}

// image builds the linux image of one binary.
func image(o Options, b Binary) (v1.Image, error) {
	bin, err := os.ReadFile(b.Path)
	if err != nil {
		return nil, fmt.Errorf("-binary %s: %w", b.Arch, err)
	}
	certs, err := os.ReadFile(o.CACerts)
	if err != nil {
		return nil, fmt.Errorf("-ca-certs: %w (install the ca-certificates package or pass another bundle)", err)
	}
	base, err := layer(o.Created, []file{
		{name: "etc/", dir: true},
		{name: "etc/passwd", data: []byte(passwd), mode: 0o644},
		{name: "etc/group", data: []byte(group), mode: 0o644},
		{name: "etc/ssl/", dir: true},
		{name: "etc/ssl/certs/", dir: true},
		{name: "etc/ssl/certs/ca-certificates.crt", data: certs, mode: 0o644},
		{name: "home/", dir: true},
		{name: "home/nonroot/", dir: true, uid: NonRootUID},
		{name: "tmp/", dir: true, mode: 0o1777},
	})
	if err != nil {
		return nil, err
	}
	app, err := layer(o.Created, []file{{name: Entrypoint[1:], data: bin, mode: 0o755}})
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.AppendLayers(img, base, app)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	p := platform(b.Arch)
	cf.Architecture, cf.OS, cf.Variant = p.Architecture, p.OS, p.Variant
	cf.Created = v1.Time{Time: o.Created}
	cf.Config.User = fmt.Sprintf("%d:%d", NonRootUID, NonRootUID)
	cf.Config.WorkingDir = "/"
	cf.Config.Entrypoint = []string{Entrypoint}
	cf.Config.Env = []string{"PATH=/", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.title":    o.Title,
		"org.opencontainers.image.version":  o.Version,
		"org.opencontainers.image.revision": o.Revision,
		"org.opencontainers.image.created":  o.Created.Format(time.RFC3339),
		"org.opencontainers.image.source":   o.Source,
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, map[string]string{
		"org.opencontainers.image.version": o.Version,
	}).(v1.Image), nil
}

type file struct {
	name string
	data []byte
	mode int64
	dir  bool
	uid  int
}

// layer makes an uncompressed-source, gzip-compressed OCI layer from files.
func layer(mtime time.Time, files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: mtime, Uid: f.uid, Gid: f.uid, Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag = tar.TypeDir
			if h.Mode == 0 {
				h.Mode = 0o755
			}
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// writeLayoutTar writes idx as an OCI image layout (index.json, oci-layout, blobs/) into a
// temporary directory and archives it into out: entries in name order, owned by 0:0, with
// modes 0755/0644 and mtime, so the tarball's bytes depend on idx alone.
func writeLayoutTar(idx v1.ImageIndex, ref, out string, mtime time.Time) error {
	dir, err := os.MkdirTemp("", "cloudgate-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	var opts []layout.Option
	if ref != "" {
		opts = append(opts, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref}))
	}
	if err := p.AppendIndex(idx, opts...); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	var paths []string
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && path != dir {
			paths = append(paths, path)
		}
		return err
	})
	sort.Strings(paths)
	for _, path := range paths {
		if err != nil {
			break
		}
		err = addFile(tw, dir, path, mtime)
	}
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, out)
}

// addFile archives path (under dir) with a header that depends only on its name, type, size
// and mtime.
func addFile(tw *tar.Writer, dir, path string, mtime time.Time) error {
	info, err := os.Lstat(path)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(dir, path)
	if err != nil {
		return err
	}
	h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime, Typeflag: tar.TypeReg, Mode: 0o644, Size: info.Size(), Format: tar.FormatUSTAR}
	if info.IsDir() {
		h.Name += "/"
		h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
	} else if !info.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file or directory", rel)
	}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if info.IsDir() {
		return nil
	}
	src, err := os.Open(path)
	if err != nil {
		return err
	}
	defer src.Close()
	_, err = io.Copy(tw, src)
	return err
}
