package test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/secure-systems-lab/go-securesystemslib/encrypted"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/dsse"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// TestSigning: LoadSigningKey reads an ECDSA P-256 key as openssl writes it (PKCS#8, EC) and as
// cosign writes it (encrypted with the password), refusing another key type or a wrong password
// with an error naming COSIGN_KEY or COSIGN_PASSWORD; SignImage's payload is cosign's simple
// signing claim about the digest and its signature verifies with the public key PublicKeyPEM
// writes (sigstore's verifier); AttestSBOM's DSSE envelope verifies with it and holds an in-toto
// statement about the digest whose predicate is the SBOM. TestE2EReleaseFromRegistry has the
// real cosign verify what make release-push pushes.
func TestSigning(t *testing.T) {
	dir := t.TempDir()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := encrypted.Encrypt(der, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(file, typ string, data []byte) string {
		f := filepath.Join(dir, file)
		if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: data}), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	pkcs8 := write("pkcs8.key", "PRIVATE KEY", der)
	for _, c := range []struct {
		file     string
		password string
	}{{pkcs8, ""}, {write("ec.key", "EC PRIVATE KEY", ecDER), ""}, {write("cosign.key", "ENCRYPTED SIGSTORE PRIVATE KEY", sealed), "pw"}} {
		sv, err := LoadSigningKey(c.file, []byte(c.password))
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(c.file), err)
		}
		if pub, _ := sv.PublicKey(); !priv.PublicKey.Equal(pub) {
			t.Errorf("%s: read another key", filepath.Base(c.file))
		}
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaDER, err := x509.MarshalPKCS8PrivateKey(rsaKey)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p384DER, err := x509.MarshalPKCS8PrivateKey(p384)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ file, password, want string }{
		{write("rsa.key", "PRIVATE KEY", rsaDER), "", "ECDSA P-256"},
		{write("p384.key", "PRIVATE KEY", p384DER), "", "ECDSA P-256"},
		{filepath.Join(dir, "cosign.key"), "wrong", "COSIGN_PASSWORD"},
		{filepath.Join(dir, "missing.key"), "", "COSIGN_KEY"},
		{write("cert.pem", "CERTIFICATE", []byte("x")), "", "COSIGN_KEY"},
	} {
		if _, err := LoadSigningKey(c.file, []byte(c.password)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %s", filepath.Base(c.file), err, c.want)
		}
	}

	sv, err := LoadSigningKey(pkcs8, nil)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM, err := PublicKeyPEM(sv)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	digest := "sha256:" + strings.Repeat("ab", 32)
	p, sig, err := SignImage(sv, "cloudgate-aws-ccm", digest)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		t.Fatal(err)
	}
	if err := verifier.VerifySignature(bytes.NewReader(raw), bytes.NewReader(p)); err != nil {
		t.Errorf("the signature does not verify with the public key: %v", err)
	}
	if err := verifier.VerifySignature(bytes.NewReader(raw), bytes.NewReader(append(p, ' '))); err == nil {
		t.Error("the signature verifies another payload")
	}
	var claim payload.SimpleContainerImage
	if err := json.Unmarshal(p, &claim); err != nil {
		t.Fatal(err)
	}
	if claim.Critical.Image.DockerManifestDigest != digest || claim.Critical.Identity.DockerReference != "cloudgate-aws-ccm" || claim.Critical.Type != payload.CosignSignatureType {
		t.Errorf("payload %s: want cosign's claim about cloudgate-aws-ccm@%s", p, digest)
	}

	sbom := []byte(`{"bomFormat":"CycloneDX","specVersion":"1.6","components":[{"name":"x","version":"v1.0.0"}]}`)
	env, err := AttestSBOM(sv, "cloudgate-aws-ccm", digest, sbom)
	if err != nil {
		t.Fatal(err)
	}
	if err := dsse.WrapVerifier(verifier).VerifySignature(bytes.NewReader(env), nil); err != nil {
		t.Errorf("the attestation's envelope does not verify: %v", err)
	}
	var e struct{ PayloadType, Payload string }
	if err := json.Unmarshal(env, &e); err != nil {
		t.Fatal(err)
	}
	st, err := base64.StdEncoding.DecodeString(e.Payload)
	if err != nil {
		t.Fatal(err)
	}
	var statement struct {
		Type          string `json:"_type"`
		PredicateType string `json:"predicateType"`
		Subject       []struct {
			Name   string            `json:"name"`
			Digest map[string]string `json:"digest"`
		} `json:"subject"`
		Predicate map[string]any `json:"predicate"`
	}
	if err := json.Unmarshal(st, &statement); err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := json.Unmarshal(sbom, &want); err != nil {
		t.Fatal(err)
	}
	wantJSON, _ := json.Marshal(want)
	gotJSON, _ := json.Marshal(statement.Predicate)
	if e.PayloadType != "application/vnd.in-toto+json" || statement.PredicateType != CycloneDXPredicateType || len(statement.Subject) != 1 ||
		statement.Subject[0].Digest["sha256"] != strings.TrimPrefix(digest, "sha256:") || statement.Subject[0].Name != "cloudgate-aws-ccm" ||
		!bytes.Equal(gotJSON, wantJSON) {
		t.Errorf("attestation %s (%s): want an in-toto statement about %s with the SBOM as its predicate", st, e.PayloadType, digest)
	}
	if _, err := AttestSBOM(sv, "cloudgate-aws-ccm", digest, []byte("not json")); err == nil {
		t.Error("an SBOM that is not JSON was attested")
	}
}
