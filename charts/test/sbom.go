package test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/uuid"
	"github.com/package-url/packageurl-go"
)

// SBOMMediaType is the media type of a release's SBOMs (CycloneDX JSON), as `cosign attach
// sbom --type cyclonedx` labels the layer it pushes.
const SBOMMediaType = "application/vnd.cyclonedx+json"

// sbomNamespace makes an SBOM's serial number a function of the image index it describes, so
// that one commit released twice writes the same file (as make image writes the same digest).
var sbomNamespace = uuid.MustParse("6b1c9f5e-0c44-4d0f-9a57-2f0a5b3f1c0e")

// archSetting is a build setting of one architecture (GOAMD64, GOARM64, GOARM, ...).
var archSetting = regexp.MustCompile(`^GO(AMD64|ARM64|ARM|386|MIPS|MIPS64|PPC64|RISCV64|WASM|LOONG64)$`)

// ImageSBOM builds the CycloneDX SBOM of an OCI layout tarball as make image writes it: the
// image (metadata.component, a container named by its index digest) and, read from the Go build
// information embedded in each platform's binary (the image config's entrypoint), the binary's
// main module, every module linked into it with its version, and the Go standard library. The
// platforms' binaries must list the same modules (one commit built for several architectures);
// they are the components of the one SBOM of the index. created is the SBOM's timestamp (the
// release's, never "now").
func ImageSBOM(file string, created time.Time) (*cdx.BOM, error) {
	img, err := ReadOCIImage(file)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "cloudgate-sbom-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := untar(file, dir); err != nil {
		return nil, err
	}
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	h, err := v1.NewHash(img.Digest)
	if err != nil {
		return nil, err
	}
	idx, err := top.ImageIndex(h)
	if err != nil {
		return nil, fmt.Errorf("%s: image index %s: %w", file, img.Digest, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var first *buildinfo.BuildInfo
	var firstPlatform string
	for _, d := range im.Manifests {
		pimg, err := idx.Image(d.Digest)
		if err != nil {
			return nil, fmt.Errorf("%s: image %s: %w", file, d.Digest, err)
		}
		bi, err := entrypointBuildInfo(pimg)
		if err != nil {
			return nil, fmt.Errorf("%s: %s image %s: %w", file, d.Platform, d.Digest, err)
		}
		if first == nil {
			first, firstPlatform = bi, d.Platform.String()
			continue
		}
		if a, b := moduleList(first), moduleList(bi); a != b || first.GoVersion != bi.GoVersion {
			return nil, fmt.Errorf("%s: the %s and %s binaries were built from different modules or Go versions (%s vs %s): one image index is one build",
				file, firstPlatform, d.Platform, first.GoVersion, bi.GoVersion)
		}
	}
	if first == nil {
		return nil, fmt.Errorf("%s: image index %s holds no image", file, img.Digest)
	}
	return buildSBOM(img, first, created), nil
}

// entrypointBuildInfo reads the Go build information of the image's entrypoint binary.
func entrypointBuildInfo(img v1.Image) (*buildinfo.BuildInfo, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	if len(cf.Config.Entrypoint) == 0 {
		return nil, errors.New("the image config has no entrypoint")
	}
	want := strings.TrimPrefix(path.Clean(cf.Config.Entrypoint[0]), "/")
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("the entrypoint %s is not in the image", cf.Config.Entrypoint[0])
		}
		if err != nil {
			return nil, err
		}
		if strings.TrimPrefix(path.Clean(h.Name), "/") != want || h.Typeflag != tar.TypeReg {
			continue
		}
		bin, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		bi, err := buildinfo.Read(bytes.NewReader(bin))
		if err != nil {
			return nil, fmt.Errorf("the entrypoint %s: %w (a Go binary carries its modules; this one does not)", cf.Config.Entrypoint[0], err)
		}
		return bi, nil
	}
}

// moduleList is the build's modules as compared across platforms.
func moduleList(bi *buildinfo.BuildInfo) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s@%s\n", bi.Main.Path, bi.Main.Version)
	for _, d := range bi.Deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		fmt.Fprintf(&b, "%s@%s=%s@%s\n", d.Path, d.Version, m.Path, m.Version)
	}
	return b.String()
}

// buildSBOM is ImageSBOM's document for one build's information.
func buildSBOM(img OCIImage, bi *buildinfo.BuildInfo, created time.Time) *cdx.BOM {
	version := func(v string) string {
		// A module built from its own checkout carries no module version ("(devel)"); the
		// image's version label is what it was released as.
		if v == "" || v == "(devel)" {
			return img.Version
		}
		return v
	}
	golang := func(p, v string) string {
		ns, n := path.Split(p)
		return packageurl.NewPackageURL(packageurl.TypeGolang, strings.TrimSuffix(ns, "/"), n, v, nil, "").ToString()
	}
	mainVersion := version(bi.Main.Version)
	mainRef := golang(bi.Main.Path, mainVersion)
	main := cdx.Component{
		BOMRef: mainRef, Type: cdx.ComponentTypeApplication, Name: bi.Main.Path, Version: mainVersion, PackageURL: mainRef,
		Properties: &[]cdx.Property{{Name: "cloudgate:go:path", Value: bi.Path}},
	}
	for _, s := range bi.Settings {
		// -ldflags carries the version stamps, not what the binary links; the architecture
		// settings are the first platform's, and the SBOM is the index's (cloudgate:platforms).
		if s.Key == "-ldflags" || s.Key == "GOARCH" || archSetting.MatchString(s.Key) {
			continue
		}
		*main.Properties = append(*main.Properties, cdx.Property{Name: "cloudgate:go:build:" + s.Key, Value: s.Value})
	}
	std := strings.TrimPrefix(bi.GoVersion, "go")
	stdRef := packageurl.NewPackageURL(packageurl.TypeGolang, "", "stdlib", std, nil, "").ToString()
	comps := []cdx.Component{main, {BOMRef: stdRef, Type: cdx.ComponentTypeLibrary, Name: "stdlib", Version: bi.GoVersion, PackageURL: stdRef,
		Description: "the Go standard library the binary was linked with"}}
	deps := []string{stdRef}
	for _, d := range bi.Deps {
		c := cdx.Component{Type: cdx.ComponentTypeLibrary, Name: d.Path, Version: d.Version, Scope: cdx.ScopeRequired}
		switch {
		case d.Replace != nil && (d.Replace.Version == "" || d.Replace.Version == "(devel)" || strings.HasPrefix(d.Replace.Path, ".") || strings.HasPrefix(d.Replace.Path, "/")):
			// Replaced by a directory of this repository (`=> ../..`): the same commit as
			// the main module.
			c.Version = mainVersion
			c.Properties = &[]cdx.Property{{Name: "cloudgate:go:replace", Value: d.Replace.Path}}
		case d.Replace != nil:
			c.Name, c.Version = d.Replace.Path, d.Replace.Version
			c.Properties = &[]cdx.Property{{Name: "cloudgate:go:replaces", Value: d.Path + "@" + d.Version}}
			if d.Replace.Sum != "" {
				*c.Properties = append(*c.Properties, cdx.Property{Name: "cloudgate:go:sum", Value: d.Replace.Sum})
			}
		case d.Sum != "":
			c.Properties = &[]cdx.Property{{Name: "cloudgate:go:sum", Value: d.Sum}}
		}
		c.PackageURL = golang(c.Name, c.Version)
		c.BOMRef = c.PackageURL
		comps = append(comps, c)
		deps = append(deps, c.BOMRef)
	}
	slices.SortFunc(comps[2:], func(a, b cdx.Component) int { return strings.Compare(a.BOMRef, b.BOMRef) })
	slices.Sort(deps)
	deps = slices.Compact(deps)

	imageRef := packageurl.NewPackageURL(packageurl.TypeOCI, "", img.Name, img.Digest,
		packageurl.QualifiersFromMap(map[string]string{"tag": img.Tag}), "").ToString()
	bom := cdx.NewBOM()
	sum := sha256.Sum256([]byte(img.Digest))
	bom.SerialNumber = "urn:uuid:" + uuid.NewSHA1(sbomNamespace, sum[:]).String()
	bom.Metadata = &cdx.Metadata{
		Timestamp: created.UTC().Format(time.RFC3339),
		Component: &cdx.Component{
			BOMRef: imageRef, Type: cdx.ComponentTypeContainer, Name: img.Name, Version: img.Version, PackageURL: imageRef,
			Hashes:     &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: strings.TrimPrefix(img.Digest, "sha256:")}},
			Properties: &[]cdx.Property{{Name: "cloudgate:platforms", Value: strings.Join(img.Platforms, ",")}},
		},
	}
	bom.Components = &comps
	bom.Dependencies = &[]cdx.Dependency{
		{Ref: imageRef, Dependencies: &[]string{mainRef}},
		{Ref: mainRef, Dependencies: &deps},
	}
	return bom
}

// EncodeSBOM writes bom as CycloneDX JSON (the library's encoder, at its current spec).
func EncodeSBOM(w io.Writer, bom *cdx.BOM) error {
	return cdx.NewBOMEncoder(w, cdx.BOMFileFormatJSON).SetPretty(true).Encode(bom)
}
