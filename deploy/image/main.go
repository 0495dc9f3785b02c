// Command image assembles a cloudgate CCM image without a Docker daemon: an OCI image
// whose layers are made from files (the static binary, the CA certificates, an /etc/passwd
// and /etc/group with the nonroot user 65532), written as an OCI image layout tarball that
// `docker load`, `podman load`, `skopeo copy oci-archive:...` and `crane push` accept.
// The layout matches deploy/image/Dockerfile (a distroless-like static base).
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

// Options describes one image.
type Options struct {
	Binary   string // the static CCM binary
	CACerts  string // a PEM bundle, installed as /etc/ssl/certs/ca-certificates.crt
	Out      string // the OCI layout tarball to write
	Ref      string // org.opencontainers.image.ref.name, e.g. cloudgate:v0.1.0
	Title    string
	Version  string
	Revision string
	Created  time.Time
	Source   string
	Arch     string
}

func main() {
	var o Options
	var created string
	flag.StringVar(&o.Binary, "binary", "", "the static CCM binary to install as "+Entrypoint)
	flag.StringVar(&o.CACerts, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "CA certificate bundle (PEM)")
	flag.StringVar(&o.Out, "out", "", "OCI layout tarball to write")
	flag.StringVar(&o.Ref, "ref", "", "image reference name stored in the layout's index (e.g. cloudgate:v0.1.0)")
	flag.StringVar(&o.Title, "title", "cloudgate-cloud-controller-manager", "org.opencontainers.image.title")
	flag.StringVar(&o.Version, "version", "", "org.opencontainers.image.version (the stamped gitVersion)")
	flag.StringVar(&o.Revision, "revision", "", "org.opencontainers.image.revision (the git commit)")
	flag.StringVar(&created, "created", "", "build date, RFC 3339 (default: now)")
	flag.StringVar(&o.Source, "source", "https://github.com/cloudgate/cloudgate", "org.opencontainers.image.source")
	flag.StringVar(&o.Arch, "arch", "amd64", "image architecture (the binary's GOARCH)")
	flag.Parse()
	o.Created = time.Now().UTC()
	if created != "" {
		t, err := time.Parse(time.RFC3339, created)
		if err != nil {
			fmt.Fprintf(os.Stderr, "image: -created %q: not RFC 3339 (e.g. 2026-11-24T17:00:00Z): %v\n", created, err)
			os.Exit(2)
		}
		o.Created = t
	}
	if err := Build(o); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// Build writes the image described by o to o.Out.
func Build(o Options) error {
	if o.Binary == "" || o.Out == "" || o.Version == "" {
		return errors.New("-binary, -out and -version are required")
	}
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return fmt.Errorf("-binary: %w", err)
	}
	certs, err := os.ReadFile(o.CACerts)
	if err != nil {
		return fmt.Errorf("-ca-certs: %w (install the ca-certificates package or pass another bundle)", err)
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
		return err
	}
	app, err := layer(o.Created, []file{{name: Entrypoint[1:], data: bin, mode: 0o755}})
	if err != nil {
		return err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.AppendLayers(img, base, app)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = o.Arch, "linux"
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
		return err
	}
	img = mutate.Annotations(img, map[string]string{
		"org.opencontainers.image.version": o.Version,
	}).(v1.Image)
	return writeLayoutTar(img, o.Ref, o.Out)
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

// writeLayoutTar writes img as an OCI image layout (index.json, oci-layout, blobs/) into a
// temporary directory and archives it into out.
func writeLayoutTar(img v1.Image, ref, out string) error {
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
	if err := p.AppendImage(img, opts...); err != nil {
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
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		info, err := d.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			h.Name += "/"
		}
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
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
