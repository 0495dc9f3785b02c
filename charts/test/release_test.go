package test

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	cgversion "github.com/cloudgate/cloudgate/cmd/version"
)

// releaseFiles is a release directory (make release, make release-dist) under test.
type releaseFiles struct {
	dir, chart string
}

// releaseUnderTest returns the release make wrote (CLOUDGATE_RELEASE_DIR: make test-chart
// runs make release-dist first, and make test hands it make test-image's images). Run
// outside make, it packages one into a temporary directory with the same code.
func releaseUnderTest(t *testing.T) releaseFiles {
	t.Helper()
	dir := os.Getenv("CLOUDGATE_RELEASE_DIR")
	if dir == "" {
		if os.Getenv("CI") != "" || os.Getenv("CLOUDGATE_CACHE_DIR") != "" {
			t.Fatal("CLOUDGATE_RELEASE_DIR is not set: run `make test-chart`, which packages the release (make release-dist) and sets it")
		}
		dir = t.TempDir()
		if _, err := PackageRelease(ReleaseOptions{Version: "v0.0.0-test", ChartDir: chartDir,
			Changelog: "../../CHANGELOG.md", Out: dir, Created: time.Unix(0, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	charts, err := filepath.Glob(filepath.Join(dir, "*.tgz"))
	if err != nil || len(charts) != 1 {
		t.Fatalf("release %s: want one packaged chart (*.tgz), found %v (%v)", dir, charts, err)
	}
	return releaseFiles{dir: dir, chart: charts[0]}
}

// TestRelease checks a release directory as a user pulling it would: SHA256SUMS covers every
// other file and matches it; the packaged chart is cloudgate at version X.Y.Z with
// appVersion vX.Y.Z, and installs the image tagged vX.Y.Z by default; the release notes are
// CHANGELOG.md's section for the version; each image tarball present (make release, make
// test) is a linux/amd64 + linux/arm64 index tagged vX.Y.Z. TestE2EUpgrade installs the
// same chart archive on a real kube-apiserver.
func TestRelease(t *testing.T) {
	rel := releaseUnderTest(t)
	ents, err := os.ReadDir(rel.dir)
	if err != nil {
		t.Fatal(err)
	}
	sums, err := ReadChecksums(filepath.Join(rel.dir, ChecksumsFile))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range ents {
		if e.Name() == ChecksumsFile {
			continue
		}
		files = append(files, e.Name())
		got, err := sha256File(filepath.Join(rel.dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if want, ok := sums[e.Name()]; !ok || want != got {
			t.Errorf("%s: sha256 %s, %s says %q", e.Name(), got, ChecksumsFile, want)
		}
	}
	if len(sums) != len(files) {
		t.Errorf("%s lists %d files, the release holds %d: %v", ChecksumsFile, len(sums), len(files), files)
	}

	ch, err := loader.Load(rel.chart)
	if err != nil {
		t.Fatal(err)
	}
	version := ch.Metadata.AppVersion
	if want := os.Getenv("CLOUDGATE_RELEASE_VERSION"); want != "" && version != want {
		t.Errorf("the packaged chart's appVersion is %s, the release is %s", version, want)
	}
	if ch.Metadata.Name != "cloudgate" || ch.Metadata.Version != strings.TrimPrefix(version, "v") || !releaseVersion.MatchString(version) {
		t.Errorf("packaged chart %s %s appVersion %s: want cloudgate, version = appVersion without its v", ch.Metadata.Name, ch.Metadata.Version, version)
	}
	if base := filepath.Base(rel.chart); base != "cloudgate-"+ch.Metadata.Version+".tgz" {
		t.Errorf("chart archive %s: want cloudgate-%s.tgz (helm package's name)", base, ch.Metadata.Version)
	}
	// The archive renders as the directory does, and its default image is the release's tag.
	objs, err := Render(rel.chart, map[string]any{}, nil)
	if err != nil {
		t.Fatalf("rendering the packaged chart: %v", err)
	}
	var image string
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			ctrs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			if len(ctrs) > 0 {
				image, _ = ctrs[0].(map[string]any)["image"].(string)
			}
		}
	}
	if !strings.HasSuffix(image, ":"+version) {
		t.Errorf("the packaged chart installs image %q by default, want the tag %s", image, version)
	}

	notes, err := os.ReadFile(filepath.Join(rel.dir, ReleaseNotesFile))
	if err != nil {
		t.Fatal(err)
	}
	want, err := ChangelogSection("../../CHANGELOG.md", version)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(notes), want) || !strings.HasPrefix(want, "## ") {
		t.Errorf("%s does not start with CHANGELOG.md's section for %s", ReleaseNotesFile, version)
	}
	if strings.Count(string(notes), "\n## ")+1 > strings.Count(want, "\n## ")+2 {
		t.Errorf("%s holds more than the version's section and its images:\n%s", ReleaseNotesFile, notes)
	}

	// The alerts' runbook links point at the release's tag, not at main.
	runbooks := 0
	for _, f := range ch.Files {
		for _, m := range regexp.MustCompile(`(?m)runbook_url:\s*"?(\S+?)"?\s*$`).FindAllSubmatch(f.Data, -1) {
			runbooks++
			if url := string(m[1]); strings.Contains(url, "/main/") || !strings.Contains(url, "/blob/"+version+"/") {
				t.Errorf("the packaged chart's %s links runbook %s, want the tag %s", f.Name, url, version)
			}
		}
	}
	for _, tpl := range ch.Templates {
		if strings.Contains(string(tpl.Data), "/main/") {
			t.Errorf("the packaged chart's %s links into main", tpl.Name)
		}
	}
	if runbooks == 0 {
		t.Error("the packaged chart has no runbook_url (files/alerts.yaml)")
	}

	// A release (no pre-release suffix) has its row in docs/versions.md, with the range of
	// Kubernetes minors the AWS CCM's client-go supports (as TestKubeVersion's unreleased row).
	if !strings.Contains(version, "-") {
		r, err := cgversion.Supported(requiredVersion(t, "../../providers/aws/go.mod", "k8s.io/client-go"))
		if err != nil {
			t.Fatal(err)
		}
		doc, err := os.ReadFile("../../docs/versions.md")
		if err != nil {
			t.Fatal(err)
		}
		var row string
		for _, line := range strings.Split(string(doc), "\n") {
			if strings.HasPrefix(line, "| "+version+" ") {
				row = line
			}
		}
		if row == "" || !strings.Contains(row, r.String()) || !strings.Contains(row, "`"+r.HelmKubeVersion()+"`") {
			t.Errorf("docs/versions.md has no row for %s naming Kubernetes %s and `%s`: %q", version, r, r.HelmKubeVersion(), row)
		}
	}

	images := 0
	for _, name := range ReleaseImages {
		file := filepath.Join(rel.dir, name+"-"+version+".oci.tar")
		if _, err := os.Stat(file); err != nil {
			continue
		}
		images++
		img, err := ReadOCIImage(file)
		if err != nil {
			t.Fatal(err)
		}
		// ReadOCIImage checked the digest against the index blob; the notes give that digest.
		if !strings.Contains(string(notes), "| `"+name+":"+version+"` | `"+filepath.Base(file)+"` | `"+img.Digest+"` |") {
			t.Errorf("%s does not give %s's index digest %s", ReleaseNotesFile, name, img.Digest)
		}
		if img.Name != name {
			t.Errorf("%s: the image inside is named %q, the docs push it as %q", file, img.Name, name)
		}
		if img.Tag != version || img.Version != version {
			t.Errorf("%s: tag %q, version %q; the chart's appVersion is %s", file, img.Tag, img.Version, version)
		}
		slices.Sort(img.Platforms)
		if !slices.Equal(img.Platforms, []string{"linux/amd64", "linux/arm64/v8"}) {
			t.Errorf("%s: platforms %v, want linux/amd64 and linux/arm64/v8", file, img.Platforms)
		}
		// Its SBOM names the index and lists the binary's main module (the CCM's own module, at
		// the version Go stamped from the checkout) and the modules it links. TestE2EReleaseFromRegistry
		// compares every module with the binary's own build information.
		sbomFile := filepath.Join(rel.dir, name+"-"+version+SBOMSuffix)
		var sbom struct {
			BOMFormat string `json:"bomFormat"`
			Metadata  struct {
				Component struct {
					Name   string `json:"name"`
					Hashes []struct {
						Content string `json:"content"`
					} `json:"hashes"`
				} `json:"component"`
			} `json:"metadata"`
			Components []struct {
				Type, Name, Version, Purl string
			} `json:"components"`
		}
		if b, err := os.ReadFile(sbomFile); err != nil {
			t.Errorf("%s has no SBOM: %v", file, err)
		} else if err := json.Unmarshal(b, &sbom); err != nil {
			t.Errorf("%s: %v", sbomFile, err)
		}
		if c := sbom.Metadata.Component; sbom.BOMFormat != "CycloneDX" || c.Name != name || len(c.Hashes) != 1 || "sha256:"+c.Hashes[0].Content != img.Digest {
			t.Errorf("%s: a %q document about %s %v, want CycloneDX about %s %s", sbomFile, sbom.BOMFormat, c.Name, c.Hashes, name, img.Digest)
		}
		wantMain := map[string]string{"cloudgate-aws-ccm": "github.com/cloudgate/cloudgate/providers/aws",
			"cloudgate-gce-ccm": "github.com/cloudgate/cloudgate/providers/gce", "cloudgate-ccm": "github.com/cloudgate/cloudgate/bench"}[name]
		var main string
		for _, c := range sbom.Components {
			if c.Type == "application" {
				main = c.Name
				if c.Version == "" {
					t.Errorf("%s: main module %s has no version", sbomFile, c.Name)
				}
				if !strings.HasPrefix(c.Purl, "pkg:golang/"+c.Name+"@") {
					t.Errorf("%s: main module purl %s", sbomFile, c.Purl)
				}
			}
		}
		if os.Getenv("CLOUDGATE_RELEASE_IMAGES") != "" && (main != wantMain || len(sbom.Components) < 20) {
			t.Errorf("%s: main module %s with %d components, want %s and the modules it links", sbomFile, main, len(sbom.Components), wantMain)
		}
	}
	if images != 0 && images != len(ReleaseImages) {
		t.Errorf("the release holds %d of the %d images", images, len(ReleaseImages))
	}
	if want := os.Getenv("CLOUDGATE_RELEASE_IMAGES"); want != "" && images == 0 {
		t.Errorf("CLOUDGATE_RELEASE_IMAGES=%s, but the release holds no image", want)
	}
	t.Logf("release %s: chart %s (appVersion %s), %d images, %d files checksummed", rel.dir, filepath.Base(rel.chart), version, images, len(sums))
}

// TestChangelogSection: a release's own section, heading included and up to the next one;
// a pre-release without one gets Unreleased; a release without one is an error naming the fix.
func TestChangelogSection(t *testing.T) {
	file := filepath.Join(t.TempDir(), "CHANGELOG.md")
	if err := os.WriteFile(file, []byte("# Changelog\n\nintro\n\n## Unreleased\n\n- next\n\n## v0.2.0 — 2026-12-01\n\n- two\n\n## v0.1.0\n\n- one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ version, want string }{
		{"v0.2.0", "## v0.2.0 — 2026-12-01\n\n- two\n"},
		{"v0.1.0", "## v0.1.0\n\n- one\n"},
		{"v0.3.0-rc.1", "## Unreleased\n\n- next\n"},
		{"v0.0.0-78addda-dirty", "## Unreleased\n\n- next\n"},
	} {
		got, err := ChangelogSection(file, c.version)
		if err != nil || got != c.want {
			t.Errorf("%s: %q, %v; want %q", c.version, got, err, c.want)
		}
	}
	if _, err := ChangelogSection(file, "v0.1"); err == nil {
		t.Error("v0.1: no error")
	}
	if _, err := ChangelogSection(file, "v0.3.0"); err == nil || !strings.Contains(err.Error(), `"## v0.3.0`) {
		t.Errorf("v0.3.0 (no section): %v, want an error naming the heading to add", err)
	}
	if _, err := PackageRelease(ReleaseOptions{Version: "0.2.0", Out: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "vX.Y.Z") {
		t.Errorf("version without v: %v", err)
	}
}

// TestReadOCIImage reads an OCI layout tarball shaped as make image writes it (index.json
// naming one image index by digest and ref.name; the index's platforms and version label),
// and refuses one without a tag. make test's TestRelease reads the real ones.
func TestReadOCIImage(t *testing.T) {
	write := func(ref string) string {
		idx := `{"schemaVersion":2,"manifests":[` +
			`{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:aa","platform":{"os":"linux","architecture":"amd64"}},` +
			`{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:bb","platform":{"os":"linux","architecture":"arm64","variant":"v8"}}],` +
			`"annotations":{"org.opencontainers.image.version":"v0.2.0"}}`
		sum := sha256.Sum256([]byte(idx))
		digest := hex.EncodeToString(sum[:])
		top := `{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.index.v1+json","digest":"sha256:` + digest +
			`","annotations":{"org.opencontainers.image.ref.name":"` + ref + `"}}]}`
		file := filepath.Join(t.TempDir(), "img.oci.tar")
		f, err := os.Create(file)
		if err != nil {
			t.Fatal(err)
		}
		tw := tar.NewWriter(f)
		for name, data := range map[string]string{"oci-layout": `{"imageLayoutVersion":"1.0.0"}`, "index.json": top, "blobs/sha256/" + digest: idx} {
			if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
				t.Fatal(err)
			}
			if _, err := tw.Write([]byte(data)); err != nil {
				t.Fatal(err)
			}
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		return file
	}
	img, err := ReadOCIImage(write("cloudgate-aws-ccm:v0.2.0"))
	if err != nil {
		t.Fatal(err)
	}
	if img.Name != "cloudgate-aws-ccm" || !strings.HasPrefix(img.Digest, "sha256:") || img.Tag != "v0.2.0" || img.Version != "v0.2.0" || !slices.Equal(img.Platforms, []string{"linux/amd64", "linux/arm64/v8"}) {
		t.Errorf("read %+v", img)
	}
	if _, err := ReadOCIImage(write("cloudgate-aws-ccm")); err == nil {
		t.Error("a reference without a tag: no error")
	}
}

// TestImageNamesAgree: the name make image writes inside each tarball (its -ref NAME:TAG and
// -title) is the tarball's own name, one of ReleaseImages, and every `skopeo copy` in the docs
// pushes a tarball under that same name. TestRelease and deploy/image's TestImages read the
// name inside the built tarballs.
func TestImageNamesAgree(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	built := regexp.MustCompile(`-out \$\(ABS_OUT\)/([a-z0-9-]+)\.oci\.tar -ref ([a-z0-9-]+):\$\(VERSION\) -title ([a-z0-9-]+)`)
	var names []string
	for _, m := range built.FindAllStringSubmatch(string(mk), -1) {
		if m[1] != m[2] || m[1] != m[3] {
			t.Errorf("make image writes %s.oci.tar holding %s (title %s): one name, please", m[1], m[2], m[3])
		}
		names = append(names, m[1])
	}
	slices.Sort(names)
	if !slices.Equal(names, ReleaseImages) {
		t.Errorf("make image writes %v, a release holds %v", names, ReleaseImages)
	}
	pushed := regexp.MustCompile(`oci-archive:(?:\S*/)?([a-z0-9-]+?)(?:-v[^ /]*|-\$VERSION)?\.oci\.tar\s+docker://\S*?/([a-z0-9-]+):`)
	pushes := 0
	for _, doc := range []string{"../../README.md", "../../docs/versions.md", "../../docs/install-aws.md", "../../docs/gce.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range pushed.FindAllStringSubmatch(string(b), -1) {
			pushes++
			if m[1] != m[2] || !slices.Contains(ReleaseImages, m[1]) {
				t.Errorf("%s pushes %s.oci.tar as %s: want the name inside the tarball, one of %v", doc, m[1], m[2], ReleaseImages)
			}
		}
	}
	if pushes < 4 {
		t.Errorf("found %d skopeo copy commands in the docs, want one in each of README, versions.md, install-aws.md and gce.md", pushes)
	}
}
