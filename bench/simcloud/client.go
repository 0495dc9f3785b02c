package simcloud

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
)

// ProviderName is the name the client registers with cloudprovider.
const ProviderName = "simcloud"

// DefaultTimeout is the per-request timeout when ClientConfig.Timeout is 0.
const DefaultTimeout = 10 * time.Second

// ClientConfig configures a Cloud. In a config file (see ParseConfig) the
// keys are endpoint, clusterName, timeout, apiKey, maxBatchSize and
// listPageSize.
type ClientConfig struct {
	// Endpoint is the API's base URL, e.g. Server.URL(). Required; http or
	// https, without credentials, query or fragment.
	Endpoint string
	// ClusterName is used by LoadBalancer and Routes calls that pass an
	// empty cluster name.
	ClusterName string
	// Timeout bounds each HTTP request from when it is sent: it covers the
	// round trip and the body read, not a wait in a WrapTransport before
	// the request reaches the wire (a client-side token bucket), and a
	// retry a WrapTransport makes gets a fresh Timeout, as the SDK clients
	// of real providers count their attempt timeouts. Default 10s.
	Timeout time.Duration
	// APIKey is sent as "Authorization: Bearer <APIKey>". Required. It is a
	// Secret: it never appears in errors or in formatted output.
	APIKey Secret
	// MaxBatchSize is what BatchInstances.MaxBatchSize reports; it must not
	// exceed the server's ServerConfig.MaxBatchSize. Default 500.
	MaxBatchSize int
	// ListPageSize is the page size ListInstances asks for; 0 leaves it to
	// the server (its ServerConfig.ListPageSize).
	ListPageSize int
	// ListTrailingPage makes a ListInstances walk end with one more
	// request, answered with an empty page: the second listing the AWS
	// adapter walks after the cluster-tagged instances (those tagged the
	// legacy way), which it reads on its first walk and, while that finds
	// none (always, here), on every ListTrailingEvery-th walk after (0 or
	// 1: every walk). Not read from config files.
	ListTrailingPage  bool
	ListTrailingEvery int
	// ListAlive makes ListInstances leave terminated instances out, as the
	// AWS adapter's list filters them by instance-state-name.
	ListAlive bool
	// LBInstanceSnapshot, when > 0, makes EnsureLoadBalancer and
	// UpdateLoadBalancer first list every instance (all pages), as the AWS
	// provider describes all instances for a load balancer's backends,
	// unless its last listing is younger than LBInstanceSnapshot and holds
	// every backend's instance (the provider's describeAllInstancesCached,
	// 10 minutes). Not read from config files.
	LBInstanceSnapshot time.Duration
	// IDBatcher, when its MaxItems > 0, sends lookups by instance ID
	// through a batcher (see IDBatcher; AWSDescribeBatcher is the AWS
	// provider's). Not read from config files.
	IDBatcher IDBatcher
	// WrapTransport, when set, wraps the client's HTTP transport: the
	// benchmark's "provider-typical client" (client-side rate limit,
	// Retry-After, bounded retries) is such a wrapper. A retry it makes
	// resends the same X-Request-Id. Not read from config files.
	WrapTransport func(http.RoundTripper) http.RoundTripper
	// Transport, when set, replaces the client's TCP transport (under
	// WrapTransport): Server.Transport, the in-memory one. Not read from
	// config files.
	Transport http.RoundTripper
}

func (c ClientConfig) withDefaults() (ClientConfig, error) {
	if c.Endpoint == "" {
		return c, errors.New("simcloud: config: endpoint is required")
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil {
		return c, errors.New("simcloud: config: endpoint is not a valid URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return c, fmt.Errorf("simcloud: config: endpoint scheme must be http or https, got %q", u.Scheme)
	}
	if u.Host == "" {
		return c, errors.New("simcloud: config: endpoint has no host")
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		// Do not echo the URL: its user info may hold a credential.
		return c, errors.New("simcloud: config: endpoint must not contain user info, a query or a fragment")
	}
	c.Endpoint = strings.TrimRight(u.String(), "/")
	if c.Timeout < 0 {
		return c, fmt.Errorf("simcloud: config: timeout must be >= 0, got %v", c.Timeout)
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.APIKey == "" {
		return c, errors.New("simcloud: config: apiKey is required")
	}
	if strings.ContainsAny(string(c.APIKey), "\r\n") {
		return c, errors.New("simcloud: config: apiKey must not contain line breaks")
	}
	if c.MaxBatchSize < 0 {
		return c, fmt.Errorf("simcloud: config: maxBatchSize must be >= 0, got %d", c.MaxBatchSize)
	}
	if c.MaxBatchSize == 0 {
		c.MaxBatchSize = DefaultMaxBatchSize
	}
	if c.ListPageSize < 0 {
		return c, fmt.Errorf("simcloud: config: listPageSize must be >= 0, got %d", c.ListPageSize)
	}
	return c, nil
}

// Cloud is a cloudprovider.Interface backed by a simcloud Server. It is safe
// for concurrent use. Its InstancesV2 value also implements
// provider.BatchInstances and provider.InstanceLister.
type Cloud struct {
	cfg       ClientConfig
	transport *http.Transport
	hc        *http.Client
	idPrefix  string
	seq       *atomic.Uint64
	snap      *lbSnapshot // LBInstanceSnapshot's listing (client_loadbalancer.go)
	ids       *idBatcher  // nil: no IDBatcher
	walk      *walkState  // ListInstances walks (client_instances.go)
}

var _ cloudprovider.Interface = (*Cloud)(nil)

// NewClient returns a Cloud for cfg. It makes no call. Call Close when done
// to release idle connections.
func NewClient(cfg ClientConfig) (*Cloud, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	tr := &http.Transport{
		Proxy:                 nil, // talk to the endpoint only, never via a proxy
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	var rt http.RoundTripper = tr
	if cfg.Transport != nil {
		rt = cfg.Transport
	}
	rt = &sendDeadline{next: rt, timeout: cfg.Timeout}
	if cfg.WrapTransport != nil {
		rt = cfg.WrapTransport(rt)
	}
	c := &Cloud{
		cfg:       cfg,
		transport: tr,
		hc:        &http.Client{Transport: rt},
		idPrefix:  "sc-" + hex.EncodeToString(b[:]) + "-",
		seq:       new(atomic.Uint64),
		snap:      &lbSnapshot{},
		walk:      &walkState{},
	}
	if cfg.IDBatcher.MaxItems > 0 {
		c.ids = &idBatcher{c: c, cfg: cfg.IDBatcher}
	}
	return c, nil
}

// Config returns the client's configuration with defaults applied.
func (c *Cloud) Config() ClientConfig { return c.cfg }

// Close releases the client's idle connections. The Cloud stays usable.
func (c *Cloud) Close() { c.transport.CloseIdleConnections() }

// Format implements fmt.Formatter so that no verb ever prints the API key
// (value receiver: a dereferenced Cloud is covered too).
func (c Cloud) Format(f fmt.State, _ rune) {
	_, _ = fmt.Fprintf(f, "simcloud.Cloud{endpoint: %s, clusterName: %s, timeout: %v, apiKey: %v}",
		c.cfg.Endpoint, c.cfg.ClusterName, c.cfg.Timeout, c.cfg.APIKey)
}

// String implements fmt.Stringer; see Format.
func (c Cloud) String() string { return fmt.Sprint(c) }

// Initialize implements cloudprovider.Interface; the client needs nothing
// from the cluster.
func (c *Cloud) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {}

// LoadBalancer implements cloudprovider.Interface.
func (c *Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return &loadBalancer{c}, true }

// Instances implements cloudprovider.Interface.
func (c *Cloud) Instances() (cloudprovider.Instances, bool) { return &instances{c}, true }

// InstancesV2 implements cloudprovider.Interface. The value also implements
// provider.BatchInstances and provider.InstanceLister.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return &instancesV2{c}, true }

// Zones implements cloudprovider.Interface.
func (c *Cloud) Zones() (cloudprovider.Zones, bool) { return &zones{c}, true }

// Clusters implements cloudprovider.Interface.
func (c *Cloud) Clusters() (cloudprovider.Clusters, bool) { return &clusters{c}, true }

// Routes implements cloudprovider.Interface.
func (c *Cloud) Routes() (cloudprovider.Routes, bool) { return &routes{c}, true }

// ProviderName implements cloudprovider.Interface.
func (c *Cloud) ProviderName() string { return ProviderName }

// HasClusterID implements cloudprovider.Interface.
func (c *Cloud) HasClusterID() bool { return true }

// APIError is a non-2xx answer of the API (other than the not-found answers
// the client turns into cloudprovider.InstanceNotFound or "does not
// exist"). A 429 has Code "TooManyRequests" and a RetryAfterDuration.
type APIError struct {
	// StatusCode is the HTTP status, e.g. 429, 500, 503, 504.
	StatusCode int
	// Code is the API's error code, e.g. CodeTooManyRequests.
	Code string
	// Message is the API's explanation.
	Message string
	// RetryAfterDuration is how long the server asked the caller to wait
	// (X-Retry-After-Ms, else Retry-After seconds); 0 when it did not say.
	RetryAfterDuration time.Duration
	// Method is the API method called, e.g. MethodGetInstance.
	Method string
	// RequestID is the X-Request-Id the client sent.
	RequestID string
}

// Error reads like "simcloud: GetInstance: HTTP 429 TooManyRequests: read
// quota exceeded; retry after 1000ms (retry after 1s) [request sc-...]".
func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "simcloud: %s: HTTP %d %s", e.Method, e.StatusCode, e.Code)
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.RetryAfterDuration > 0 {
		fmt.Fprintf(&b, " (retry after %v)", e.RetryAfterDuration)
	}
	if e.RequestID != "" {
		b.WriteString(" [request " + e.RequestID + "]")
	}
	return b.String()
}

// RetryAfter reports how long the server asked the caller to wait, and
// whether it said.
func (e *APIError) RetryAfter() (time.Duration, bool) {
	return e.RetryAfterDuration, e.RetryAfterDuration > 0
}

// Throttled reports whether the call was rejected for quota (HTTP 429).
func (e *APIError) Throttled() bool { return e.StatusCode == http.StatusTooManyRequests }

// Unwrap exposes a throttled answer with a delay as a
// *k8s.io/cloud-provider/api.RetryError, which the service controller
// reads (errors.As) to schedule its retry.
func (e *APIError) Unwrap() error {
	if e.Throttled() && e.RetryAfterDuration > 0 {
		return api.NewRetryError(e.Error(), e.RetryAfterDuration)
	}
	return nil
}

// maxResponseBytes bounds a response body (a 500-instance page is ~150 KiB).
const maxResponseBytes = 64 << 20

// do makes one API call: apiMethod names it for errors. A 2xx answer is
// decoded into out (when non-nil); anything else is an *APIError.
func (c *Cloud) do(ctx context.Context, apiMethod, httpMethod, path string, query url.Values, in, out any) error {
	u := c.cfg.Endpoint + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("simcloud: %s: encode request: %w", apiMethod, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, httpMethod, u, body)
	if err != nil {
		return fmt.Errorf("simcloud: %s: %w", apiMethod, err)
	}
	reqID := c.idPrefix + strconv.FormatUint(c.seq.Add(1), 10)
	req.Header.Set("Authorization", "Bearer "+string(c.cfg.APIKey))
	req.Header.Set(headerRequestID, reqID)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}

	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("simcloud: %s [request %s]: %w", apiMethod, reqID, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return fmt.Errorf("simcloud: %s [request %s]: read response: %w", apiMethod, reqID, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("simcloud: %s [request %s]: decode response: %w", apiMethod, reqID, err)
		}
		return nil
	}
	return newAPIError(apiMethod, reqID, resp, data)
}

func newAPIError(apiMethod, reqID string, resp *http.Response, data []byte) *APIError {
	e := &APIError{StatusCode: resp.StatusCode, Method: apiMethod, RequestID: reqID}
	var eb errorBody
	if json.Unmarshal(data, &eb) == nil && eb.Error.Code != "" {
		e.Code, e.Message = eb.Error.Code, eb.Error.Message
	} else {
		e.Code = strings.ReplaceAll(http.StatusText(resp.StatusCode), " ", "")
	}
	if ms, err := strconv.ParseInt(resp.Header.Get(headerRetryAfterMs), 10, 64); err == nil && ms > 0 {
		e.RetryAfterDuration = time.Duration(ms) * time.Millisecond
	} else if secs, err := strconv.ParseInt(resp.Header.Get(headerRetryAfter), 10, 64); err == nil && secs > 0 {
		e.RetryAfterDuration = time.Duration(secs) * time.Second
	}
	return e
}

// sendDeadline bounds one request from when it is sent (under any
// WrapTransport): the deadline covers the round trip and the body, and is
// released when the body is closed.
type sendDeadline struct {
	next    http.RoundTripper
	timeout time.Duration
}

func (d *sendDeadline) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(req.Context(), d.timeout)
	resp, err := d.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// isNotFound reports whether err is the API's 404 with the given code.
func isNotFound(err error, code string) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.StatusCode == http.StatusNotFound && ae.Code == code
}
