package ec2sim

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// The fixed test credentials every client of the simulator signs with
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY in the environment of the CCM
// binaries the tests start). They open nothing but this simulator.
const (
	AccessKeyID     = "AKIDSIMULATED"
	SecretAccessKey = "simulated-secret"
)

// maxClockSkew is how far a request's X-Amz-Date may be from the server's
// clock, as on AWS (15 minutes).
const maxClockSkew = 15 * time.Minute

// authError is a refused signature: the error code EC2 answers and the one
// the load balancing APIs answer differ (EC2 AuthFailure for an unknown key,
// ELB and ELBv2 InvalidClientTokenId), as do their documents.
type authError struct {
	status   int
	ec2, elb string // codes
	message  string
}

func (e *authError) apiError(a api) *apiError {
	code := e.ec2
	if a != apiEC2 {
		code = e.elb
	}
	return &apiError{status: e.status, code: code, message: e.message}
}

func authFailure(status int, ec2Code, elbCode, msg string) *authError {
	return &authError{status: status, ec2: ec2Code, elb: elbCode, message: msg}
}

// authenticate verifies the request's Signature Version 4 as AWS does: the
// access key must be known, the date within 15 minutes, and the signature
// the one the key's secret gives over the request as received (method,
// path, query, the headers it names as signed, and the body's SHA-256). The
// signature is recomputed with the SDK's own signer over a request holding
// only the signed headers, so a request changed in flight (a header, the
// body) is refused with SignatureDoesNotMatch. It reads the body and puts
// it back for the form parser.
func (s *Server) authenticate(r *http.Request) *authError {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return authFailure(http.StatusBadRequest, "IncompleteSignature", "IncompleteSignature", "reading the request body: "+err.Error())
	}
	r.Body = io.NopCloser(bytes.NewReader(body))

	auth := r.Header.Get("Authorization")
	if auth == "" {
		return authFailure(http.StatusForbidden, "MissingAuthenticationToken", "MissingAuthenticationToken",
			"Request is missing Authentication Token")
	}
	const algorithm = "AWS4-HMAC-SHA256 "
	if !strings.HasPrefix(auth, algorithm) {
		return authFailure(http.StatusBadRequest, "IncompleteSignature", "IncompleteSignature",
			"Authorization header must use AWS4-HMAC-SHA256")
	}
	fields := map[string]string{}
	for _, f := range strings.Split(strings.TrimPrefix(auth, algorithm), ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(f), "=")
		if ok {
			fields[k] = v
		}
	}
	cred, signedHeaders, signature := fields["Credential"], fields["SignedHeaders"], fields["Signature"]
	scope := strings.Split(cred, "/") // AKID/yyyymmdd/region/service/aws4_request
	if len(scope) != 5 || scope[4] != "aws4_request" || signedHeaders == "" || signature == "" {
		return authFailure(http.StatusBadRequest, "IncompleteSignature", "IncompleteSignature",
			"Authorization header requires Credential (key/date/region/service/aws4_request), SignedHeaders and Signature")
	}
	secret, ok := s.credentials()[scope[0]]
	if !ok {
		return authFailure(http.StatusUnauthorized, "AuthFailure", "InvalidClientTokenId",
			"AWS was not able to validate the provided access credentials")
	}
	signingTime, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return authFailure(http.StatusBadRequest, "IncompleteSignature", "IncompleteSignature",
			"X-Amz-Date must be a date such as 20060102T150405Z")
	}
	if d := time.Since(signingTime); d > maxClockSkew || d < -maxClockSkew {
		return authFailure(http.StatusBadRequest, "RequestExpired", "SignatureDoesNotMatch",
			"Signature expired: "+signingTime.Format("20060102T150405Z")+" is more than 15 minutes from the server's time")
	}
	if signingTime.Format("20060102") != scope[1] {
		return authFailure(http.StatusForbidden, "SignatureDoesNotMatch", "SignatureDoesNotMatch",
			"Credential should be scoped to the date of X-Amz-Date")
	}

	// The request as the client signed it: only the headers it names.
	u := *r.URL
	u.Host = r.Host
	if u.Scheme == "" {
		u.Scheme = "http"
	}
	re, err := http.NewRequestWithContext(context.Background(), r.Method, u.String(), nil)
	if err != nil {
		return authFailure(http.StatusBadRequest, "IncompleteSignature", "IncompleteSignature", err.Error())
	}
	re.Host = r.Host
	re.URL.RawQuery = r.URL.RawQuery
	re.ContentLength = int64(len(body))
	for _, h := range strings.Split(signedHeaders, ";") {
		switch h {
		case "host", "content-length":
			continue // the signer takes them from Host and ContentLength
		}
		for _, v := range r.Header.Values(h) {
			re.Header.Add(h, v)
		}
	}
	if !strings.Contains(";"+signedHeaders+";", ";content-length;") {
		re.ContentLength = 0 // the client did not sign it
	}
	sum := sha256.Sum256(body)
	err = v4.NewSigner().SignHTTP(context.Background(),
		aws.Credentials{AccessKeyID: scope[0], SecretAccessKey: secret, SessionToken: r.Header.Get("X-Amz-Security-Token")},
		re, hex.EncodeToString(sum[:]), scope[3], scope[2], signingTime)
	if err != nil {
		return authFailure(http.StatusInternalServerError, "InternalError", "InternalFailure", "recomputing the signature: "+err.Error())
	}
	want := ""
	for _, f := range strings.Split(strings.TrimPrefix(re.Header.Get("Authorization"), algorithm), ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(f), "Signature="); ok {
			want = v
		}
	}
	if subtle.ConstantTimeCompare([]byte(want), []byte(signature)) != 1 {
		return authFailure(http.StatusForbidden, "SignatureDoesNotMatch", "SignatureDoesNotMatch",
			"The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method.")
	}
	return nil
}

// credentials are the access keys the simulator accepts, by key ID: the
// configured ones, or the fixed test pair and every key Config.Accounts
// names, each with the fixed test secret.
func (s *Server) credentials() map[string]string {
	if s.cfg.Credentials != nil {
		return s.cfg.Credentials
	}
	creds := map[string]string{AccessKeyID: SecretAccessKey}
	for key := range s.cfg.Accounts {
		creds[key] = SecretAccessKey
	}
	return creds
}

// SignedForm is a form-encoded Query API request (Action, Version and the
// rest of form) to the simulator signed with the fixed test credentials for
// service ("ec2" or "elasticloadbalancing"), for tests that send requests
// without an SDK client.
func SignedForm(ctx context.Context, endpoint, service string, form url.Values) (*http.Request, error) {
	body := form.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	return req, Sign(req, body, AccessKeyID, service)
}

// Sign signs req, whose body is body, for service with accessKey and the
// fixed test secret (the secret every key of Config.Accounts has).
func Sign(req *http.Request, body, accessKey, service string) error {
	sum := sha256.Sum256([]byte(body))
	return v4.NewSigner().SignHTTP(req.Context(), aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: SecretAccessKey},
		req, hex.EncodeToString(sum[:]), service, "us-east-1", time.Now())
}
