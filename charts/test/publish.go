package test

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/registry"
)

// PublishOptions says where PublishRelease pushes a release directory.
type PublishOptions struct {
	Dir string // the release directory PackageRelease wrote
	// Registry is HOST[:PORT][/PATH]: each image goes to Registry/NAME:vX.Y.Z and the chart
	// to oci://Registry/charts/cloudgate:X.Y.Z.
	Registry string
	// PlainHTTP talks HTTP, not HTTPS (a registry on 127.0.0.1, as the tests start).
	PlainHTTP bool
}

// Published is what PublishRelease pushed: the references a user installs from.
type Published struct {
	Chart         string            // oci://REGISTRY/charts/cloudgate (helm install ... --version X.Y.Z)
	ChartVersion  string            // X.Y.Z
	ChartManifest string            // the chart's OCI manifest digest
	ChartLayer    string            // the chart archive's digest (sha256 of the .tgz, as in SHA256SUMS)
	Images        map[string]string // image name to REGISTRY/NAME@sha256:... (the index digest in the notes)
	// Attached maps an image name to the cosign attachments pushed beside it, by tag:
	// sha256-HEX.sbom always, sha256-HEX.sig and sha256-HEX.att when the release is signed.
	Attached map[string][]string
}

// PublishRelease pushes a release directory to an OCI registry: each image tarball's index
// (go-containerregistry, credentials from the Docker config) tagged with the release, and the
// packaged chart (Helm's registry client, credentials from helm registry login or the Docker
// config), as `helm push` does. Each image's SBOM, signature and SBOM attestation (when the
// release has them) go beside it as cosign attaches them: by tag, REGISTRY/NAME:sha256-HEX.sbom,
// .sig and .att, HEX the index digest's (pushAttachments).
func PublishRelease(o PublishOptions) (Published, error) {
	charts, err := filepath.Glob(filepath.Join(o.Dir, "cloudgate-*.tgz"))
	if err != nil || len(charts) != 1 {
		return Published{}, fmt.Errorf("%s: want one packaged chart, found %v (%v)", o.Dir, charts, err)
	}
	ch, err := loader.Load(charts[0])
	if err != nil {
		return Published{}, err
	}
	version := ch.Metadata.AppVersion
	pub := Published{Chart: "oci://" + o.Registry + "/charts/" + ch.Metadata.Name, ChartVersion: ch.Metadata.Version, Images: map[string]string{}, Attached: map[string][]string{}}

	var nameOpts []name.Option
	if o.PlainHTTP {
		nameOpts = append(nameOpts, name.Insecure)
	}
	for _, img := range ReleaseImages {
		file := filepath.Join(o.Dir, img+"-"+version+".oci.tar")
		if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
			continue
		}
		read, err := ReadOCIImage(file)
		if err != nil {
			return Published{}, err
		}
		dir, err := os.MkdirTemp("", "cloudgate-publish-")
		if err != nil {
			return Published{}, err
		}
		defer os.RemoveAll(dir)
		if err := untar(file, dir); err != nil {
			return Published{}, err
		}
		lp, err := layout.FromPath(dir)
		if err != nil {
			return Published{}, fmt.Errorf("%s: %w", file, err)
		}
		top, err := lp.ImageIndex()
		if err != nil {
			return Published{}, fmt.Errorf("%s: %w", file, err)
		}
		h, err := v1.NewHash(read.Digest)
		if err != nil {
			return Published{}, err
		}
		idx, err := top.ImageIndex(h)
		if err != nil {
			return Published{}, fmt.Errorf("%s: image index %s: %w", file, read.Digest, err)
		}
		ref, err := name.NewTag(o.Registry+"/"+read.Name+":"+read.Tag, nameOpts...)
		if err != nil {
			return Published{}, err
		}
		if err := remote.WriteIndex(ref, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return Published{}, fmt.Errorf("pushing %s: %w", ref, err)
		}
		pub.Images[read.Name] = o.Registry + "/" + read.Name + "@" + read.Digest
		tags, err := pushAttachments(ref.Context(), o.Dir, read.Name+"-"+version, read.Digest)
		if err != nil {
			return Published{}, err
		}
		pub.Attached[read.Name] = tags
	}

	data, err := os.ReadFile(charts[0])
	if err != nil {
		return Published{}, err
	}
	opts := []registry.ClientOption{registry.ClientOptWriter(io.Discard)}
	if o.PlainHTTP {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	client, err := registry.NewClient(opts...)
	if err != nil {
		return Published{}, err
	}
	res, err := client.Push(data, strings.TrimPrefix(pub.Chart, "oci://")+":"+pub.ChartVersion)
	if err != nil {
		return Published{}, fmt.Errorf("pushing the chart to %s: %w", pub.Chart, err)
	}
	pub.ChartManifest, pub.ChartLayer = res.Manifest.Digest, res.Chart.Digest
	return pub, nil
}

// untar extracts an OCI layout tarball (regular files and directories only) into dir.
func untar(file, dir string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(bufio.NewReader(f))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		if !filepath.IsLocal(h.Name) {
			return fmt.Errorf("%s: entry %q leaves the layout", file, h.Name)
		}
		dst := filepath.Join(dir, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			out, err := os.Create(dst)
			if err != nil {
				return err
			}
			if _, err := io.Copy(out, tr); err != nil {
				out.Close()
				return err
			}
			if err := out.Close(); err != nil {
				return err
			}
		}
	}
}

// pushAttachments pushes, beside the image index digest in repo, what the release directory
// holds for it (files base + the suffixes of sign.go): the SBOM as `cosign attach sbom` does
// (one layer of SBOMMediaType), the signature as `cosign sign --key` does (one layer: the
// simple-signing payload, its signature in the layer's CosignSignatureAnnotation) and the SBOM
// attestation as `cosign attest --key` does (one layer: the DSSE envelope), each an OCI image
// tagged sha256-HEX.sbom, .sig and .att, cosign's tag for the attachments of that digest. It
// returns the tags pushed.
func pushAttachments(repo name.Repository, dir, base, digest string) ([]string, error) {
	type attachment struct {
		suffix, file string
		mediaType    types.MediaType
		annotations  func() (map[string]string, error)
	}
	atts := []attachment{
		{"sbom", base + SBOMSuffix, SBOMMediaType, nil},
		{"sig", base + PayloadSuffix, SimpleSigningMediaType, func() (map[string]string, error) {
			sig, err := os.ReadFile(filepath.Join(dir, base+SignatureSuffix))
			return map[string]string{CosignSignatureAnnotation: strings.TrimSpace(string(sig))}, err
		}},
		{"att", base + AttestationSuffix, DSSEMediaType, func() (map[string]string, error) {
			return map[string]string{CosignSignatureAnnotation: "", "predicateType": CycloneDXPredicateType}, nil
		}},
	}
	var tags []string
	for _, a := range atts {
		data, err := os.ReadFile(filepath.Join(dir, a.file))
		if errors.Is(err, os.ErrNotExist) {
			continue // an unsigned release has no .sig nor .att
		}
		if err != nil {
			return nil, err
		}
		layer := static.NewLayer(data, a.mediaType)
		add := mutate.Addendum{Layer: layer}
		if a.annotations != nil {
			if add.Annotations, err = a.annotations(); err != nil {
				return nil, err
			}
		}
		img, err := mutate.Append(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), add)
		if err != nil {
			return nil, err
		}
		tag := repo.Tag(strings.Replace(digest, ":", "-", 1) + "." + a.suffix)
		if err := remote.Write(tag, img, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return nil, fmt.Errorf("pushing %s: %w", tag, err)
		}
		tags = append(tags, tag.TagStr())
	}
	return tags, nil
}
