package provider

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// The start-up line shows the effective configuration and never the
// upstream's inline config or a Redis password.
func TestStartupLogRedactsSecrets(t *testing.T) {
	const upstreamSecret = "aws_secret_access_key=UPSTREAM-S3CR3T"
	const redisSecret = "REDIS-S3CR3T-PASSWORD"
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "redis-password")
	if err := os.WriteFile(pwFile, []byte(redisSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := "upstream:\n  name: fake\n  config: \"" + upstreamSecret + "\"\n" +
		"limits:\n  shared:\n    account: acct-1\n    redis:\n      address: 127.0.0.1:1\n      passwordFile: " + pwFile + "\n"

	var buf bytes.Buffer
	klog.LogToStderr(false)
	klog.SetOutput(&buf)
	defer func() {
		klog.SetOutput(os.Stderr)
		klog.LogToStderr(true)
	}()
	c, err := newFromConfig(strings.NewReader(yaml))
	if err != nil {
		t.Fatal(err)
	}
	defer c.(*lazyCloud).Close()
	klog.Flush()
	log := buf.String()
	if !strings.Contains(log, "effective configuration") || !strings.Contains(log, `upstream="fake"`) {
		t.Fatalf("no start-up configuration line in the log:\n%s", log)
	}
	if !strings.Contains(log, "acct-1") || !strings.Contains(log, redactedMark) {
		t.Fatalf("start-up line lacks the configuration or the redaction mark:\n%s", log)
	}
	for _, secret := range []string{upstreamSecret, "UPSTREAM-S3CR3T", redisSecret} {
		if strings.Contains(log, secret) {
			t.Fatalf("log holds the secret %q:\n%s", secret, log)
		}
	}
}
