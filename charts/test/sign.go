package test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/encrypted"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/dsse"
	"github.com/sigstore/sigstore/pkg/signature/payload"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// What cosign reads from a registry (its "legacy" attachments, found by tag next to the image:
// REPO:sha256-HEX.sig, .att and .sbom, HEX the image index's digest).
const (
	// SimpleSigningMediaType is the media type of a .sig layer: the signed payload.
	SimpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	// DSSEMediaType is the media type of an .att layer: a DSSE envelope of an in-toto statement.
	DSSEMediaType = "application/vnd.dsse.envelope.v1+json"
	// CosignSignatureAnnotation holds a .sig layer's signature (base64); empty on an .att layer,
	// whose envelope carries its own.
	CosignSignatureAnnotation = "dev.cosignproject.cosign/signature"
	// CycloneDXPredicateType is the in-toto predicate type of a CycloneDX SBOM (cosign attest
	// --type cyclonedx, cosign verify-attestation --type cyclonedx).
	CycloneDXPredicateType = "https://cyclonedx.org/bom"
	inTotoPayloadType      = "application/vnd.in-toto+json"
)

// Release file name suffixes (after NAME-vX.Y.Z) of what PackageRelease writes per image, and
// the public key file it writes when it signs.
const (
	SBOMSuffix        = ".cdx.json"     // the CycloneDX SBOM
	PayloadSuffix     = ".payload.json" // the simple-signing payload signed (cosign sign --output-payload)
	SignatureSuffix   = ".sig"          // its signature, base64 (cosign sign --output-signature)
	AttestationSuffix = ".att.json"     // the SBOM attestation's DSSE envelope (what cosign attest pushes)
	PublicKeyFile     = "cosign.pub"
)

// LoadSigningKey reads a PEM private key for signing a release: an ECDSA P-256 key as
// `cosign generate-key-pair` writes it (encrypted; password decrypts it: COSIGN_PASSWORD) or as
// openssl writes it ("PRIVATE KEY" PKCS#8 or "EC PRIVATE KEY").
func LoadSigningKey(file string, password []byte) (*signature.ECDSASignerVerifier, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("COSIGN_KEY: %w", err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("COSIGN_KEY %s: no PEM block", file)
	}
	var key crypto.PrivateKey
	switch block.Type {
	case "ENCRYPTED SIGSTORE PRIVATE KEY", "ENCRYPTED COSIGN PRIVATE KEY":
		// cosign's own format: PKCS#8 sealed with scrypt and secretbox, as cosign opens it.
		der, err := encrypted.Decrypt(block.Bytes, password)
		if err != nil {
			return nil, fmt.Errorf("COSIGN_KEY %s: decrypting with COSIGN_PASSWORD: %w", file, err)
		}
		if key, err = x509.ParsePKCS8PrivateKey(der); err != nil {
			return nil, fmt.Errorf("COSIGN_KEY %s: %w", file, err)
		}
	default:
		if key, err = cryptoutils.UnmarshalPEMToPrivateKey(b, cryptoutils.StaticPasswordFunc(password)); err != nil {
			return nil, fmt.Errorf("COSIGN_KEY %s: %w", file, err)
		}
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, fmt.Errorf("COSIGN_KEY %s: a %T key; want ECDSA P-256 (cosign generate-key-pair's)", file, key)
	}
	return signature.LoadECDSASignerVerifier(ec, crypto.SHA256)
}

// PublicKeyPEM is the signer's public key as cosign reads --key.
func PublicKeyPEM(sv signature.SignerVerifier) ([]byte, error) {
	pub, err := sv.PublicKey()
	if err != nil {
		return nil, err
	}
	return cryptoutils.MarshalPublicKeyToPEM(pub)
}

// imageIdentity is the image a signature names: its repository without a registry (the release
// is signed before it is pushed anywhere; cosign checks the digest, not the docker-reference,
// so a signature holds wherever the index is copied, as `cosign copy` relies on) at its index
// digest.
func imageIdentity(imageName, digest string) (name.Digest, error) {
	return name.NewDigest(imageName+"@"+digest, name.WithDefaultRegistry(""))
}

// SignImage returns cosign's simple-signing payload for the image index digest (sigstore's
// payload package) and its signature (base64, as the .sig annotation holds it).
func SignImage(sv signature.Signer, imageName, digest string) (payloadJSON []byte, sig string, err error) {
	ref, err := imageIdentity(imageName, digest)
	if err != nil {
		return nil, "", err
	}
	payloadJSON, err = json.Marshal(payload.Cosign{Image: ref})
	if err != nil {
		return nil, "", err
	}
	raw, err := sv.SignMessage(bytes.NewReader(payloadJSON))
	if err != nil {
		return nil, "", err
	}
	return payloadJSON, base64.StdEncoding.EncodeToString(raw), nil
}

// AttestSBOM returns the DSSE envelope (sigstore's dsse signer) of an in-toto statement whose
// subject is the image index digest and whose predicate is the CycloneDX SBOM: what
// `cosign attest --type cyclonedx --predicate SBOM` pushes and `cosign verify-attestation
// --type cyclonedx` checks.
func AttestSBOM(sv signature.Signer, imageName, digest string, sbomJSON []byte) ([]byte, error) {
	ref, err := imageIdentity(imageName, digest)
	if err != nil {
		return nil, err
	}
	var pred map[string]any
	if err := json.Unmarshal(sbomJSON, &pred); err != nil {
		return nil, fmt.Errorf("SBOM of %s: %w", imageName, err)
	}
	predicate, err := structpb.NewStruct(pred)
	if err != nil {
		return nil, err
	}
	alg, hexDigest, _ := strings.Cut(digest, ":")
	st := &intoto.Statement{
		Type:          intoto.StatementTypeUri,
		Subject:       []*intoto.ResourceDescriptor{{Name: ref.Context().Name(), Digest: map[string]string{alg: hexDigest}}},
		PredicateType: CycloneDXPredicateType,
		Predicate:     predicate,
	}
	if err := st.Validate(); err != nil {
		return nil, err
	}
	stJSON, err := protojson.Marshal(st)
	if err != nil {
		return nil, err
	}
	return dsse.WrapSigner(sv, inTotoPayloadType).SignMessage(bytes.NewReader(stJSON))
}

// signRelease writes, for one image of a release, the signed payload, its signature and the
// SBOM attestation (file names: base + the suffixes above) and returns their names.
func signRelease(sv signature.Signer, dir, base, imageName, digest string, sbomJSON []byte) ([]string, error) {
	if sv == nil {
		return nil, errors.New("no signing key")
	}
	p, sig, err := SignImage(sv, imageName, digest)
	if err != nil {
		return nil, fmt.Errorf("signing %s@%s: %w", imageName, digest, err)
	}
	att, err := AttestSBOM(sv, imageName, digest, sbomJSON)
	if err != nil {
		return nil, fmt.Errorf("attesting the SBOM of %s@%s: %w", imageName, digest, err)
	}
	files := map[string][]byte{base + PayloadSuffix: p, base + SignatureSuffix: []byte(sig), base + AttestationSuffix: att}
	var names []string
	for f, data := range files {
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			return nil, err
		}
		names = append(names, f)
	}
	return names, nil
}
