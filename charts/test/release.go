package test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"
	"helm.sh/helm/v4/pkg/action"
)

// Release file names in a release directory (make release writes one per version).
const (
	ReleaseNotesFile = "RELEASE-NOTES.md"
	ChecksumsFile    = "SHA256SUMS"
)

// ReleaseImages are the OCI layout tarballs make image writes, by their base name
// (without .oci.tar); a release names each NAME-vX.Y.Z.oci.tar.
var ReleaseImages = []string{"cloudgate-aws-ccm", "cloudgate-ccm", "cloudgate-gce-ccm"}

// releaseVersion is what a release is tagged: vMAJOR.MINOR.PATCH with an optional
// pre-release (git describe's v0.0.0-<commit> between tags is one).
var releaseVersion = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

// ReleaseOptions says what PackageRelease assembles.
type ReleaseOptions struct {
	// Version is the release, vX.Y.Z: the images' tag, the chart's appVersion (which is
	// the image tag the chart installs by default) and, without the "v", its version.
	Version   string
	ChartDir  string // the chart's directory (charts/cloudgate)
	Changelog string // CHANGELOG.md
	// ImagesDir holds make image's tarballs (ReleaseImages) built at Version; empty: the
	// release holds the chart, notes and checksums only (what the chart tests need).
	ImagesDir string
	Out       string    // the release directory; it must not exist or be empty
	Created   time.Time // the chart archive's file times (the commit's, as make image's)
	// Signer signs each image index digest and attests its SBOM (LoadSigningKey: make release's
	// COSIGN_KEY); nil: the release has SBOMs but no signatures (make release-dist for the tests).
	Signer signature.SignerVerifier
}

// PackageRelease writes a release into o.Out: the packaged chart (helm package
// --version X.Y.Z --app-version vX.Y.Z, through Helm's SDK), the images (each checked to be
// tagged o.Version), each image's CycloneDX SBOM (ImageSBOM) and, with o.Signer, the cosign
// signature of its index digest and the SBOM's attestation (SignImage, AttestSBOM) and the
// public key, the CHANGELOG section of the version (ReleaseNotesFile) and ChecksumsFile
// (sha256sum's format) over every other file. It returns the files written.
func PackageRelease(o ReleaseOptions) ([]string, error) {
	if !releaseVersion.MatchString(o.Version) {
		return nil, fmt.Errorf("version %q: want vX.Y.Z (optionally -PRERELEASE), e.g. make release VERSION=v0.2.0", o.Version)
	}
	if ents, err := os.ReadDir(o.Out); err == nil && len(ents) > 0 {
		return nil, fmt.Errorf("%s is not empty: remove it or choose another release directory", o.Out)
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	notes, err := ChangelogSection(o.Changelog, o.Version)
	if err != nil {
		return nil, err
	}
	// The chart is packaged from a copy whose runbook URLs point at the release's tag: the
	// runbook an alert links to is then the one written for the running version.
	staged, err := os.MkdirTemp("", "cloudgate-release-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(staged)
	chartCopy := filepath.Join(staged, filepath.Base(filepath.Clean(o.ChartDir)))
	if err := os.CopyFS(chartCopy, os.DirFS(o.ChartDir)); err != nil {
		return nil, fmt.Errorf("copying the chart %s: %w", o.ChartDir, err)
	}
	if err := PinRunbookURLs(chartCopy, o.Version); err != nil {
		return nil, err
	}
	p := action.NewPackage()
	p.Version, p.AppVersion, p.Destination = strings.TrimPrefix(o.Version, "v"), o.Version, o.Out
	created := o.Created.UTC()
	p.SourceDateEpoch = &created
	chartFile, err := p.Run(chartCopy, nil)
	if err != nil {
		return nil, fmt.Errorf("helm package %s: %w", o.ChartDir, err)
	}
	files := []string{filepath.Base(chartFile), ReleaseNotesFile}
	var images []releasedImage
	if o.ImagesDir != "" {
		for _, name := range ReleaseImages {
			src := filepath.Join(o.ImagesDir, name+".oci.tar")
			img, err := ReadOCIImage(src)
			if err != nil {
				return nil, fmt.Errorf("%w (make image VERSION=%s writes it)", err, o.Version)
			}
			if img.Name != name {
				return nil, fmt.Errorf("%s names its image %q, not %q (the name the docs push): rebuild it with make image", src, img.Name, name)
			}
			if img.Tag != o.Version || img.Version != o.Version {
				return nil, fmt.Errorf("%s is tagged %q (version label %q), not %s: run make image VERSION=%s first",
					src, img.Tag, img.Version, o.Version, o.Version)
			}
			dst := fmt.Sprintf("%s-%s.oci.tar", name, o.Version)
			if err := copyFile(src, filepath.Join(o.Out, dst)); err != nil {
				return nil, err
			}
			files = append(files, dst)
			base := fmt.Sprintf("%s-%s", name, o.Version)
			bom, err := ImageSBOM(src, o.Created)
			if err != nil {
				return nil, fmt.Errorf("the SBOM of %s: %w", src, err)
			}
			var sbom bytes.Buffer
			if err := EncodeSBOM(&sbom, bom); err != nil {
				return nil, err
			}
			if err := os.WriteFile(filepath.Join(o.Out, base+SBOMSuffix), sbom.Bytes(), 0o644); err != nil {
				return nil, err
			}
			files = append(files, base+SBOMSuffix)
			if o.Signer != nil {
				signed, err := signRelease(o.Signer, o.Out, base, name, img.Digest, sbom.Bytes())
				if err != nil {
					return nil, err
				}
				files = append(files, signed...)
			}
			images = append(images, releasedImage{name: name, file: dst, digest: img.Digest, platforms: img.Platforms, base: base})
		}
	}
	if o.Signer != nil && len(images) > 0 {
		pub, err := PublicKeyPEM(o.Signer)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(o.Out, PublicKeyFile), pub, 0o644); err != nil {
			return nil, err
		}
		files = append(files, PublicKeyFile)
	}
	notes += imagesNotes(o.Version, images, o.Signer != nil)
	if err := os.WriteFile(filepath.Join(o.Out, ReleaseNotesFile), []byte(notes), 0o644); err != nil {
		return nil, err
	}
	slices.Sort(files)
	var sums strings.Builder
	for _, f := range files {
		sum, err := sha256File(filepath.Join(o.Out, f))
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&sums, "%s  %s\n", sum, f)
	}
	if err := os.WriteFile(filepath.Join(o.Out, ChecksumsFile), []byte(sums.String()), 0o644); err != nil {
		return nil, err
	}
	return append(files, ChecksumsFile), nil
}

// runbookURL matches a link into this repository's default branch; PinRunbookURLs points
// it at a release's tag instead.
var runbookURL = regexp.MustCompile(`(https://github\.com/cloudgate/cloudgate/(?:blob|tree)/)main/`)

// PinRunbookURLs rewrites, in every file of the chart directory dir, the links into the
// repository's main branch (the alerts' runbook_url) to the tag version.
func PinRunbookURLs(dir, version string) error {
	return filepath.WalkDir(dir, func(file string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		if pinned := runbookURL.ReplaceAll(b, []byte("${1}"+version+"/")); !bytes.Equal(pinned, b) {
			return os.WriteFile(file, pinned, 0o644)
		}
		return nil
	})
}

// releasedImage is an image tarball of a release and its image index's digest.
type releasedImage struct {
	name, file, digest string
	platforms          []string
	base               string // NAME-vX.Y.Z: the SBOM, signature and attestation files' prefix
}

// imagesNotes is the part of the release notes after the CHANGELOG section: each image's
// index digest and how to install by it. No images (a chart-only release directory): none.
func imagesNotes(version string, images []releasedImage, signed bool) string {
	if len(images) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Images\n\nEach is a multi-arch image index; its digest is the same wherever it is copied to\n(`skopeo copy --all oci-archive:FILE docker://REGISTRY/NAME:%s`).\n\n", version)
	b.WriteString("| Image | File | Index digest | Platforms | SBOM |\n|---|---|---|---|---|\n")
	for _, img := range images {
		fmt.Fprintf(&b, "| `%s:%s` | `%s` | `%s` | %s | `%s` |\n", img.name, version, img.file, img.digest, strings.Join(img.platforms, ", "), img.base+SBOMSuffix)
	}
	chart := strings.TrimPrefix(version, "v")
	for _, img := range images {
		if img.name != "cloudgate-aws-ccm" {
			continue
		}
		fmt.Fprintf(&b, "\nInstall by digest (the chart from its OCI registry; the tag is then not used):\n\n"+
			"```sh\nhelm upgrade --install cloudgate oci://REGISTRY/charts/cloudgate --version %s -n kube-system \\\n"+
			"  --set image.repository=REGISTRY/%s --set image.digest=%s \\\n"+
			"  --set-file upstream.cloudConfig=aws.conf\n```\n", chart, img.name, img.digest)
		b.WriteString("\n### SBOMs and signatures\n\nEach image's SBOM (`NAME-" + version + SBOMSuffix + "`, CycloneDX JSON) lists the Go modules, with their\n" +
			"versions, that its binary was linked from (read from the binary's build information) and the Go\n" +
			"standard library's version; `make release-push` attaches it to the image as cosign does (the tag\n" +
			"`sha256-HEX.sbom`, HEX the index digest's).\n")
		if !signed {
			b.WriteString("\nThis release directory is not signed (it was made without COSIGN_KEY).\n")
			break
		}
		fmt.Fprintf(&b, "\nEach index digest is signed with the release key (`%s`, ECDSA P-256; cosign's key-based\n"+
			"signature: the simple-signing payload `NAME-%s%s` and its signature `NAME-%s%s`), and each SBOM\n"+
			"is attested with it (`NAME-%s%s`, an in-toto statement about the index digest in a DSSE\n"+
			"envelope). `make release-push` pushes them next to each image (`sha256-HEX.sig`, `sha256-HEX.att`).\n"+
			"The signatures are not in a transparency log: verify with the key, not with Rekor.\n\n"+
			"```sh\ncosign verify --key %s --insecure-ignore-tlog REGISTRY/%s@%s\n"+
			"cosign verify-attestation --key %s --insecure-ignore-tlog --type cyclonedx REGISTRY/%s@%s \\\n"+
			"  | jq -r .payload | base64 -d | jq .predicate   # the signed SBOM\n"+
			"cosign verify-blob --key %s --insecure-ignore-tlog --signature %s-%s%s %s-%s%s   # offline\n```\n",
			PublicKeyFile, version, PayloadSuffix, version, SignatureSuffix, version, AttestationSuffix,
			PublicKeyFile, img.name, img.digest, PublicKeyFile, img.name, img.digest,
			PublicKeyFile, img.name, version, SignatureSuffix, img.name, version, PayloadSuffix)
	}
	return b.String()
}

// ChangelogSection returns the section of CHANGELOG.md headed "## vX.Y.Z" (the heading
// may go on, e.g. "## v0.2.0 — 2026-12-01"), heading included, up to the next "## ". A
// pre-release (vX.Y.Z-SUFFIX, e.g. a git describe version between tags) without its own
// section gets the "## Unreleased" section: what it holds beyond the last release.
func ChangelogSection(file, version string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	section := func(heading string) string {
		var out []string
		in := false
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "## ") {
				if in {
					break
				}
				rest, ok := strings.CutPrefix(line, "## "+heading)
				in = ok && (rest == "" || strings.HasPrefix(rest, " "))
			}
			if in {
				out = append(out, line)
			}
		}
		return strings.TrimSpace(strings.Join(out, "\n"))
	}
	if s := section(version); s != "" {
		return s + "\n", nil
	}
	if strings.Contains(version, "-") {
		if s := section("Unreleased"); s != "" {
			return s + "\n", nil
		}
	}
	return "", fmt.Errorf("%s has no section \"## %s\": rename \"## Unreleased\" to \"## %s — DATE\" (the release notes) before releasing", file, version, version)
}

// OCIImage is what a release check reads from an OCI layout tarball of a multi-arch image.
type OCIImage struct {
	Name      string   // the name of the index's org.opencontainers.image.ref.name (before ":TAG")
	Tag       string   // the tag of the index's org.opencontainers.image.ref.name
	Digest    string   // the image index's digest, sha256:HEX: what a pull by digest names
	Version   string   // the index's org.opencontainers.image.version
	Platforms []string // os/arch[/variant] of each image in the index
}

// ReadOCIImage reads index.json of an OCI layout tarball (make image's) and the image
// index it points at.
func ReadOCIImage(file string) (OCIImage, error) {
	type descriptor struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Annotations map[string]string `json:"annotations"`
		Platform    *struct {
			OS           string `json:"os"`
			Architecture string `json:"architecture"`
			Variant      string `json:"variant"`
		} `json:"platform"`
	}
	type index struct {
		Manifests   []descriptor      `json:"manifests"`
		Annotations map[string]string `json:"annotations"`
	}
	f, err := os.Open(file)
	if err != nil {
		return OCIImage{}, err
	}
	defer f.Close()
	blobs := map[string][]byte{}
	tr := tar.NewReader(bufio.NewReader(f))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return OCIImage{}, fmt.Errorf("%s: %w", file, err)
		}
		name := path.Clean(h.Name)
		// Only the small JSON documents are kept: index.json and index/manifest blobs.
		if h.Typeflag == tar.TypeReg && h.Size < 1<<20 {
			data, err := io.ReadAll(tr)
			if err != nil {
				return OCIImage{}, fmt.Errorf("%s: %s: %w", file, name, err)
			}
			blobs[name] = data
		}
	}
	var top index
	if err := json.Unmarshal(blobs["index.json"], &top); err != nil || len(top.Manifests) != 1 {
		return OCIImage{}, fmt.Errorf("%s: index.json: want one image index (err %v, %d entries)", file, err, len(top.Manifests))
	}
	ref := top.Manifests[0].Annotations["org.opencontainers.image.ref.name"]
	name, tag, ok := strings.Cut(ref, ":")
	if !ok {
		return OCIImage{}, fmt.Errorf("%s: reference %q has no tag", file, ref)
	}
	alg, hexDigest, _ := strings.Cut(top.Manifests[0].Digest, ":")
	blob := blobs[path.Join("blobs", alg, hexDigest)]
	// The digest a pull by digest names is the index blob's own: check it, not only trust
	// index.json.
	if sum := sha256.Sum256(blob); alg != "sha256" || hex.EncodeToString(sum[:]) != hexDigest {
		return OCIImage{}, fmt.Errorf("%s: the image index blob does not have the digest %s that index.json names", file, top.Manifests[0].Digest)
	}
	var idx index
	if err := json.Unmarshal(blob, &idx); err != nil {
		return OCIImage{}, fmt.Errorf("%s: image index %s: %w", file, top.Manifests[0].Digest, err)
	}
	img := OCIImage{Name: name, Tag: tag, Digest: top.Manifests[0].Digest, Version: idx.Annotations["org.opencontainers.image.version"]}
	for _, m := range idx.Manifests {
		if m.Platform == nil {
			return OCIImage{}, fmt.Errorf("%s: index entry %s has no platform", file, m.Digest)
		}
		p := m.Platform.OS + "/" + m.Platform.Architecture
		if m.Platform.Variant != "" {
			p += "/" + m.Platform.Variant
		}
		img.Platforms = append(img.Platforms, p)
	}
	return img, nil
}

// ReadChecksums parses a sha256sum file: file name to hex digest.
func ReadChecksums(file string) (map[string]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	sums := map[string]string{}
	for i, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok || len(sum) != 64 || name == "" {
			return nil, fmt.Errorf("%s:%d: %q is not \"SHA256  NAME\"", file, i+1, line)
		}
		sums[name] = sum
	}
	return sums, nil
}

func sha256File(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
