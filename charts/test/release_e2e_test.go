//go:build linux

package test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"helm.sh/helm/v4/pkg/registry"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/resource"

	"github.com/cloudgate/cloudgate/testkit/e2e"
)

// cosignBin is the cosign that make test-chart builds (.ci/cosign.sh, CLOUDGATE_COSIGN).
func cosignBin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("CLOUDGATE_COSIGN")
	if bin == "" {
		msg := "CLOUDGATE_COSIGN is not set: run `make test-chart`, which builds cosign (.ci/cosign.sh) and sets it"
		if os.Getenv("CI") != "" || os.Getenv("CLOUDGATE_CACHE_DIR") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bin
}

// cosignRun runs cosign with args in a home of its own (nothing read from or written to the
// user's), offline: every verification below is by key, none asks a transparency log.
func cosignRun(ctx context.Context, t *testing.T, bin, home string, env []string, args ...string) (stdout []byte, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = home
	cmd.Env = append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TUF_ROOT=" + filepath.Join(home, "tuf"), "NO_COLOR=1"}, env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.Bytes(), errors.Join(err, errors.New("cosign "+strings.Join(args, " ")+":\n"+errOut.String()))
	}
	return out.Bytes(), nil
}

// TestE2EReleaseFromRegistry: a signed release, end to end from an OCI registry, as a platform
// team consumes it. A key pair made by `cosign generate-key-pair` (a throwaway one,
// encrypted with a password as cosign writes it) signs the release (PackageRelease with
// LoadSigningKey: make release COSIGN_KEY=...); PublishRelease pushes it to a registry the
// test starts on 127.0.0.1 (go-containerregistry's, on a real TCP listener). Then, as a user:
//
//   - the chart is pulled by version from oci://127.0.0.1:PORT/charts/cloudgate (Helm's
//     registry client, what helm pull runs) and is the released archive;
//   - each image is pulled by the index digest the release notes give;
//   - `cosign verify --key cosign.pub` (the real cosign, built by .ci/cosign.sh) accepts each
//     index digest's signature and names that digest; with another key it refuses;
//   - `cosign verify-attestation --key cosign.pub --type cyclonedx` accepts each SBOM
//     attestation, its predicate the release's SBOM file; `cosign download sbom` gives that
//     file; and the SBOM's Go modules are those `go version -m` reads from the binary of the
//     pulled image;
//   - the pulled chart is installed with image.repository and image.digest on the real
//     kube-apiserver (Helm's SDK): the release is deployed, every object of its manifest is
//     stored, and the Deployment's image is REGISTRY/cloudgate-aws-ccm@DIGEST.
//
// Under make test (CLOUDGATE_RELEASE_IMAGES) the images are make test-image's: the real CCMs
// and their real modules. Run alone, they are small Go programs (writeImageTarball).
func TestE2EReleaseFromRegistry(t *testing.T) {
	etcdBin, apiserverBin, _ := e2e.Tools(t)
	cosign := cosignBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()

	version, images := releaseImages(t)

	// The release key: cosign's own key format, so that make release reads what the release
	// manager generated with cosign.
	keyDir := filepath.Join(dir, "keys")
	if err := os.MkdirAll(keyDir, 0o700); err != nil {
		t.Fatal(err)
	}
	password := "e2e-" + e2e.RandomToken(t)
	if _, err := cosignRun(ctx, t, cosign, keyDir, []string{"COSIGN_PASSWORD=" + password}, "generate-key-pair"); err != nil {
		t.Fatal(err)
	}
	signer, err := LoadSigningKey(filepath.Join(keyDir, "cosign.key"), []byte(password))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSigningKey(filepath.Join(keyDir, "cosign.key"), []byte("not the password")); err == nil || !strings.Contains(err.Error(), "COSIGN_PASSWORD") {
		t.Errorf("the cosign key with a wrong password: %v, want an error naming COSIGN_PASSWORD", err)
	}
	// A second key pair: cosign must refuse the release's signatures with it.
	otherDir := filepath.Join(dir, "other")
	if err := os.MkdirAll(otherDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := cosignRun(ctx, t, cosign, otherDir, []string{"COSIGN_PASSWORD=x"}, "generate-key-pair"); err != nil {
		t.Fatal(err)
	}

	rel := filepath.Join(dir, "release")
	files, err := PackageRelease(ReleaseOptions{Version: version, ChartDir: chartDir, Changelog: "../../CHANGELOG.md",
		ImagesDir: images, Out: rel, Created: time.Unix(0, 0), Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	sums, err := ReadChecksums(filepath.Join(rel, ChecksumsFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range ReleaseImages {
		for _, suffix := range []string{".oci.tar", SBOMSuffix, PayloadSuffix, SignatureSuffix, AttestationSuffix} {
			if f := img + "-" + version + suffix; sums[f] == "" || !slices.Contains(files, f) {
				t.Errorf("the signed release has no %s in %s (files %v)", f, ChecksumsFile, files)
			}
		}
	}
	pubKey := filepath.Join(rel, PublicKeyFile)
	if got, want := readFile(t, pubKey), readFile(t, filepath.Join(keyDir, "cosign.pub")); !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(want)) {
		t.Errorf("the release's %s is not the public key cosign generated:\n%s\nwant\n%s", PublicKeyFile, got, want)
	}
	notes := string(readFile(t, filepath.Join(rel, ReleaseNotesFile)))
	for _, want := range []string{"cosign verify --key " + PublicKeyFile, "cosign verify-attestation --key " + PublicKeyFile, SBOMSuffix, "sha256-HEX.sig"} {
		if !strings.Contains(notes, want) {
			t.Errorf("%s does not say %q", ReleaseNotesFile, want)
		}
	}

	host, pub := publishToTestRegistry(t, rel)

	// The chart by version, with a new client, saved as helm pull saves it.
	client, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptWriter(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := client.Pull(strings.TrimPrefix(pub.Chart, "oci://") + ":" + pub.ChartVersion)
	if err != nil {
		t.Fatalf("pulling %s --version %s: %v", pub.Chart, pub.ChartVersion, err)
	}
	chartFile := filepath.Join(dir, "cloudgate-"+pub.ChartVersion+".tgz")
	if err := os.WriteFile(chartFile, pulled.Chart.Data, 0o644); err != nil {
		t.Fatal(err)
	}
	if pulled.Chart.Digest != "sha256:"+sums["cloudgate-"+pub.ChartVersion+".tgz"] {
		t.Errorf("pulled chart digest %s, %s says sha256:%s", pulled.Chart.Digest, ChecksumsFile, sums["cloudgate-"+pub.ChartVersion+".tgz"])
	}

	home := filepath.Join(dir, "cosign-home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	verifyFlags := []string{"--key", pubKey, "--insecure-ignore-tlog", "--allow-http-registry"}
	for _, img := range ReleaseImages {
		local, err := ReadOCIImage(filepath.Join(rel, img+"-"+version+".oci.tar"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(notes, "`"+local.Digest+"`") {
			t.Errorf("%s does not give %s's index digest %s", ReleaseNotesFile, img, local.Digest)
		}
		ref := host + "/" + img + "@" + local.Digest
		if pub.Images[img] != ref {
			t.Errorf("published %s as %s, want %s", img, pub.Images[img], ref)
		}
		hexDigest := strings.TrimPrefix(local.Digest, "sha256:")
		if want := []string{"sha256-" + hexDigest + ".sbom", "sha256-" + hexDigest + ".sig", "sha256-" + hexDigest + ".att"}; !slices.Equal(pub.Attached[img], want) {
			t.Errorf("%s: attached %v, want %v", img, pub.Attached[img], want)
		}
		dref, err := name.NewDigest(ref, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := remote.Index(dref, remote.WithContext(ctx))
		if err != nil {
			t.Fatalf("pulling %s: %v", ref, err)
		}
		if d, err := idx.Digest(); err != nil || d.String() != local.Digest {
			t.Fatalf("pulled %s: digest %v (%v)", ref, d, err)
		}

		// The signature, by the real cosign.
		out, err := cosignRun(ctx, t, cosign, home, nil, append(append([]string{"verify"}, verifyFlags...), ref)...)
		if err != nil {
			t.Fatalf("%s: %v", img, err)
		}
		var claims []struct {
			Critical struct {
				Image struct {
					Digest string `json:"docker-manifest-digest"`
				} `json:"image"`
				Type string `json:"type"`
			} `json:"critical"`
		}
		if err := json.Unmarshal(out, &claims); err != nil || len(claims) != 1 || claims[0].Critical.Image.Digest != local.Digest {
			t.Errorf("cosign verify %s: %d claims (%v), want one for %s:\n%s", ref, len(claims), err, local.Digest, out)
		}
		other := []string{"verify", "--key", filepath.Join(otherDir, "cosign.pub"), "--insecure-ignore-tlog", "--allow-http-registry", ref}
		if _, err := cosignRun(ctx, t, cosign, home, nil, other...); err == nil {
			t.Errorf("cosign verify %s with another key accepted the release's signature", ref)
		}

		// The SBOM: attested (signed), attached, and the modules of the pulled image's binary.
		sbomFile := readFile(t, filepath.Join(rel, img+"-"+version+SBOMSuffix))
		var sbom map[string]any
		if err := json.Unmarshal(sbomFile, &sbom); err != nil {
			t.Fatal(err)
		}
		out, err = cosignRun(ctx, t, cosign, home, nil, append(append([]string{"verify-attestation", "--type", "cyclonedx"}, verifyFlags...), ref)...)
		if err != nil {
			t.Fatalf("%s: %v", img, err)
		}
		var env struct {
			PayloadType, Payload string
		}
		if err := json.Unmarshal(bytes.TrimSpace(out), &env); err != nil {
			t.Fatalf("cosign verify-attestation %s: %v:\n%s", ref, err, out)
		}
		stJSON, err := base64.StdEncoding.DecodeString(env.Payload)
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			PredicateType string `json:"predicateType"`
			Subject       []struct {
				Digest map[string]string `json:"digest"`
			} `json:"subject"`
			Predicate map[string]any `json:"predicate"`
		}
		if err := json.Unmarshal(stJSON, &st); err != nil {
			t.Fatal(err)
		}
		if st.PredicateType != CycloneDXPredicateType || len(st.Subject) != 1 || st.Subject[0].Digest["sha256"] != hexDigest {
			t.Errorf("%s: attestation of type %s about %v, want %s about %s", img, st.PredicateType, st.Subject, CycloneDXPredicateType, local.Digest)
		}
		if !reflect.DeepEqual(st.Predicate, sbom) {
			t.Errorf("%s: the attested SBOM is not the release's %s", img, img+"-"+version+SBOMSuffix)
		}
		out, err = cosignRun(ctx, t, cosign, home, nil, "download", "sbom", "--allow-http-registry", ref)
		if err != nil {
			t.Fatalf("%s: %v", img, err)
		}
		if !bytes.Equal(bytes.TrimSpace(out), bytes.TrimSpace(sbomFile)) {
			t.Errorf("cosign download sbom %s: %d bytes, not the release's SBOM (%d bytes)", ref, len(out), len(sbomFile))
		}
		checkSBOMModules(t, idx, img, sbom)
	}

	// The pulled chart, by digest, on the real kube-apiserver.
	cp := e2e.StartControlPlane(ctx, t, dir, etcdBin, apiserverBin)
	if err := e2e.Poll(ctx, "namespace kube-system", 200*time.Millisecond, 30*time.Second, func() (bool, error) {
		_, err := cp.Admin.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "admin.kubeconfig")
	cp.Kubeconfig(t, kubeconfig, cp.AdminToken)
	helm := newHelm(t, kubeconfig)
	repo, digest, _ := strings.Cut(pub.Images["cloudgate-aws-ccm"], "@")
	installed := helm.install(t, cloudgateRelease, chartFile, map[string]any{
		"image":    map[string]any{"repository": repo, "digest": digest},
		"upstream": map[string]any{"name": "aws-batch", "cloudConfig": "[Global]\nZone = us-east-1a\n"},
	})
	if installed.Info.Status != rcommon.StatusDeployed || installed.Chart.Metadata.Version != pub.ChartVersion {
		t.Errorf("helm install of the pulled chart: status %s, chart %s; want deployed, %s", installed.Info.Status, installed.Chart.Metadata.Version, pub.ChartVersion)
	}
	objs, err := helm.cfg.KubeClient.Build(strings.NewReader(installed.Manifest), false)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	if err := objs.Visit(func(info *resource.Info, err error) error {
		if err != nil {
			return err
		}
		kinds[info.Mapping.GroupVersionKind.Kind]++
		if err := info.Get(); err != nil {
			return errors.Join(err, errors.New(info.ObjectName()+" of the release is not stored"))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	d, err := cp.Admin.AppsV1().Deployments("kube-system").Get(ctx, workloadName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		t.Fatalf("the release has no Deployment %s (objects %v)", workloadName, kinds)
	}
	if err != nil {
		t.Fatal(err)
	}
	if got, want := d.Spec.Template.Spec.Containers[0].Image, repo+"@"+digest; got != want {
		t.Errorf("the installed Deployment runs %s, want the digest reference %s", got, want)
	}
	t.Logf("release %s from %s: chart %s, %d images signed and attested (cosign verify, verify-attestation), installed by digest %s: objects %v",
		version, host, pub.ChartVersion, len(pub.Images), digest, kinds)
}

// checkSBOMModules compares the SBOM's Go modules with those `go version -m` reads from the
// entrypoint binary of each image of the pulled index: the main module, the Go version, and
// for every dependency the binary lists a component at the version it was built with (the
// replacement's, for a module replaced by another version), and no other component.
func checkSBOMModules(t *testing.T, idx v1.ImageIndex, img string, sbom map[string]any) {
	t.Helper()
	comps := map[string]string{}
	list, _ := sbom["components"].([]any)
	for _, c := range list {
		m, _ := c.(map[string]any)
		n, _ := m["name"].(string)
		v, _ := m["version"].(string)
		comps[n] = v
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range im.Manifests {
		pimg, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := pimg.ConfigFile()
		if err != nil || len(cf.Config.Entrypoint) == 0 {
			t.Fatalf("%s %s: config %v, %v", img, d.Platform, cf, err)
		}
		bin := filepath.Join(t.TempDir(), "entrypoint")
		extractFile(t, pimg, strings.TrimPrefix(cf.Config.Entrypoint[0], "/"), bin)
		out, err := exec.Command("go", "version", "-m", bin).Output()
		if err != nil {
			t.Fatalf("go version -m (the %s %s entrypoint): %v", img, d.Platform, err)
		}
		deps := 0
		lines := strings.Split(string(out), "\n")
		for i, line := range lines {
			f := strings.Split(strings.TrimPrefix(line, "\t"), "\t")
			switch {
			case i == 0:
				goVersion := strings.TrimSpace(line[strings.LastIndex(line, " ")+1:])
				if comps["stdlib"] != goVersion {
					t.Errorf("%s %s: built with %s, the SBOM's stdlib is %q", img, d.Platform, goVersion, comps["stdlib"])
				}
			case len(f) >= 2 && f[0] == "mod":
				if _, ok := comps[f[1]]; !ok {
					t.Errorf("%s %s: the SBOM has no component for the main module %s", img, d.Platform, f[1])
				}
			case len(f) >= 3 && f[0] == "dep":
				deps++
				path, version := f[1], f[2]
				if i+1 < len(lines) {
					if r := strings.Split(strings.TrimPrefix(lines[i+1], "\t"), "\t"); len(r) >= 2 && r[0] == "=>" {
						if len(r) >= 3 && r[2] != "" && !strings.HasPrefix(r[1], ".") {
							path, version = r[1], r[2]
						} else {
							version = "" // a directory of this repository: any version (the release's)
						}
					}
				}
				if got, ok := comps[path]; !ok || (version != "" && got != version) {
					t.Errorf("%s %s: the binary links %s %s, the SBOM has %q", img, d.Platform, path, version, got)
				}
			}
		}
		if want := deps + 2; len(comps) != want {
			t.Errorf("%s %s: the SBOM lists %d components, want the main module, stdlib and the binary's %d modules", img, d.Platform, len(comps), deps)
		}
	}
}

// extractFile writes the file at path (no leading /) of img's filesystem to dst.
func extractFile(t *testing.T, img v1.Image, path, dst string) {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(bufio.NewReader(rc))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s is not in the image", path)
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimPrefix(h.Name, "/") != path {
			continue
		}
		f, err := os.Create(dst)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, tr); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		return
	}
}

func readFile(t *testing.T, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
