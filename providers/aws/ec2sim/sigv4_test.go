package ec2sim

import (
	"context"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	"github.com/aws/smithy-go"
)

// TestSignatureVerified: a request signed with the test credentials is
// answered; the same request changed after signing (its body, a signed
// header), one signed with another secret, one from an unknown key and an
// unsigned one are refused with the codes and documents AWS answers, each
// counted as a received request answered with an error.
func TestSignatureVerified(t *testing.T) {
	s := start(t, Config{Region: "us-east-1", Unthrottled: true, Zones: []Zone{{Name: "us-east-1a", ID: "use1-az1"}}})
	ctx := context.Background()
	form := url.Values{"Action": {"DescribeAvailabilityZones"}, "Version": {APIVersion}}

	send := func(req *http.Request) (int, string) {
		t.Helper()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	signed := func() *http.Request {
		t.Helper()
		req, err := SignedForm(ctx, s.URL, "ec2", form)
		if err != nil {
			t.Fatal(err)
		}
		return req
	}

	if code, body := send(signed()); code != http.StatusOK || !strings.Contains(body, "us-east-1a") {
		t.Fatalf("signed request: HTTP %d %s", code, body)
	}

	tamperedBody := signed()
	other := url.Values{"Action": {"DescribeAvailabilityZones"}, "Version": {APIVersion}, "ZoneName.1": {"us-east-1a"}}.Encode()
	tamperedBody.Body, tamperedBody.ContentLength = io.NopCloser(strings.NewReader(other)), int64(len(other))
	tamperedHeader := signed()
	tamperedHeader.Header.Set("X-Amz-Date", "20200101T000000Z")
	tamperedType := signed()
	tamperedType.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	unsigned := signed()
	unsigned.Header.Del("Authorization")
	wrongSecret := signed()
	wrongSecret.Header.Set("Authorization", strings.Replace(wrongSecret.Header.Get("Authorization"), "Signature=", "Signature=0", 1))

	for _, c := range []struct {
		name   string
		req    *http.Request
		status int
		code   string
	}{
		{"body changed after signing", tamperedBody, http.StatusForbidden, "SignatureDoesNotMatch"},
		{"signed header changed", tamperedType, http.StatusForbidden, "SignatureDoesNotMatch"},
		{"date changed", tamperedHeader, http.StatusBadRequest, "RequestExpired"},
		{"no signature", unsigned, http.StatusForbidden, "MissingAuthenticationToken"},
		{"another signature", wrongSecret, http.StatusForbidden, "SignatureDoesNotMatch"},
	} {
		code, body := send(c.req)
		var doc errorResponse
		if err := xml.Unmarshal([]byte(body), &doc); err != nil || code != c.status || doc.Code != c.code {
			t.Errorf("%s: HTTP %d %s (%v), want %d %s", c.name, code, body, err, c.status, c.code)
		}
	}
	if st := s.Stats("DescribeAvailabilityZones"); st.Requests != 6 || st.Errors != 5 {
		t.Errorf("counted %+v, want 6 requests, 5 refused (%v)", st, s.AllStats())
	}

	// Through the SDK: another secret, another key (EC2's AuthFailure).
	for _, c := range []struct{ key, secret, code string }{
		{AccessKeyID, "not-the-secret", "SignatureDoesNotMatch"},
		{"AKIDUNKNOWN", SecretAccessKey, "AuthFailure"},
	} {
		ec := ec2.New(ec2.Options{Region: "us-east-1", BaseEndpoint: aws.String(s.URL),
			Credentials: credentials.NewStaticCredentialsProvider(c.key, c.secret, ""),
			Retryer:     retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts = 1 })})
		var ae smithy.APIError
		if _, err := ec.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{}); !errors.As(err, &ae) || ae.ErrorCode() != c.code {
			t.Errorf("EC2 with key %s: %v, want %s", c.key, err, c.code)
		}
	}
	// The load balancing APIs answer in their own document and codes.
	for _, c := range []struct{ key, secret, code string }{
		{AccessKeyID, "not-the-secret", "SignatureDoesNotMatch"},
		{"AKIDUNKNOWN", SecretAccessKey, "InvalidClientTokenId"},
	} {
		lc := elb.New(elb.Options{Region: "us-east-1", BaseEndpoint: aws.String(s.URL),
			Credentials: credentials.NewStaticCredentialsProvider(c.key, c.secret, ""),
			Retryer:     retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts = 1 })})
		var ae smithy.APIError
		if _, err := lc.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{}); !errors.As(err, &ae) || ae.ErrorCode() != c.code {
			t.Errorf("ELB with key %s: %v, want %s", c.key, err, c.code)
		}
	}
	if _, err := client(t, s, 1).DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{}); err != nil {
		t.Errorf("SDK client with the test credentials: %v", err)
	}
}
