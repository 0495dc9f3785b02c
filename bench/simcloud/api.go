package simcloud

import (
	"fmt"
	"io"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// API method names, as used in Counters, WriteRecord.Method and
// APIError.Method. Each HTTP endpoint is exactly one method.
const (
	// Reads (charged to the read bucket).
	MethodGetInstance       = "GetInstance"       // GET /v1/instances/{id}
	MethodGetInstanceByName = "GetInstanceByName" // GET /v1/instances?name=NODE
	MethodBatchGetInstances = "BatchGetInstances" // POST /v1/instances:batchGet
	MethodListInstances     = "ListInstances"     // GET /v1/instances[?pageToken=&pageSize=]
	MethodGetLoadBalancer   = "GetLoadBalancer"   // GET /v1/loadbalancers/{name}
	MethodListRoutes        = "ListRoutes"        // GET /v1/clusters/{cluster}/routes
	MethodListClusters      = "ListClusters"      // GET /v1/clusters
	MethodGetMaster         = "GetMaster"         // GET /v1/clusters/{cluster}/master

	// Writes (charged to the write bucket).
	MethodEnsureLoadBalancer = "EnsureLoadBalancer" // PUT /v1/loadbalancers/{name}
	MethodDeleteLoadBalancer = "DeleteLoadBalancer" // DELETE /v1/loadbalancers/{name}
	MethodCreateRoute        = "CreateRoute"        // POST /v1/clusters/{cluster}/routes
	MethodDeleteRoute        = "DeleteRoute"        // DELETE /v1/clusters/{cluster}/routes/{name}
)

// isWrite reports whether method is charged to the write bucket.
func isWrite(method string) bool {
	switch method {
	case MethodEnsureLoadBalancer, MethodDeleteLoadBalancer, MethodCreateRoute, MethodDeleteRoute:
		return true
	}
	return false
}

// Error codes carried in error bodies and APIError.Code.
const (
	CodeTooManyRequests      = "TooManyRequests"      // 429: quota exceeded or throttle storm
	CodeInternalError        = "InternalError"        // 500: injected error
	CodeServiceUnavailable   = "ServiceUnavailable"   // 503: outage or server closing
	CodeGatewayTimeout       = "GatewayTimeout"       // 504: injected hang
	CodeBadRequest           = "BadRequest"           // 400
	CodeUnauthorized         = "Unauthorized"         // 401
	CodeConflict             = "Conflict"             // 409
	CodeInstanceNotFound     = "InstanceNotFound"     // 404 on instance lookups
	CodeLoadBalancerNotFound = "LoadBalancerNotFound" // 404 on GetLoadBalancer
	CodeClusterNotFound      = "ClusterNotFound"      // 404 on GetMaster
)

// Header names of the wire protocol.
const (
	headerRequestID    = "X-Request-Id"
	headerRetryAfterMs = "X-Retry-After-Ms"
	headerRetryAfter   = "Retry-After"
)

// Wire types. They are unexported: the HTTP API is documented in
// docs/simcloud.md and only this package's client speaks it.

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type instanceJSON struct {
	ID         string           `json:"id"`
	NodeName   string           `json:"nodeName"`
	ProviderID string           `json:"providerID"`
	Type       string           `json:"type"`
	Zone       string           `json:"zone"`
	Region     string           `json:"region"`
	Addresses  []v1.NodeAddress `json:"addresses"`
	Shutdown   bool             `json:"shutdown"`
	Terminated bool             `json:"terminated,omitempty"`
}

type batchGetRequest struct {
	IDs   []string `json:"ids,omitempty"`
	Names []string `json:"names,omitempty"`
}

// batchResult is one looked-up item; Instance is nil when it does not exist.
type batchResult struct {
	Found    bool          `json:"found"`
	Instance *instanceJSON `json:"instance,omitempty"`
}

// batchGetResponse answers IDs and Names in request order.
type batchGetResponse struct {
	ByID   []batchResult `json:"byId"`
	ByName []batchResult `json:"byName"`
}

type listInstancesResponse struct {
	Instances     []instanceJSON `json:"instances"`
	NextPageToken string         `json:"nextPageToken,omitempty"`
}

type lbPortJSON struct {
	Name     string `json:"name,omitempty"`
	Protocol string `json:"protocol"`
	Port     int32  `json:"port"`
	NodePort int32  `json:"nodePort,omitempty"`
}

type ensureLBRequest struct {
	Cluster string       `json:"cluster"`
	Hosts   []string     `json:"hosts"`
	Ports   []lbPortJSON `json:"ports,omitempty"`
}

type loadBalancerJSON struct {
	Name      string       `json:"name"`
	Cluster   string       `json:"cluster"`
	Hosts     []string     `json:"hosts"`
	Ports     []lbPortJSON `json:"ports,omitempty"`
	IngressIP string       `json:"ingressIP"`
}

type deleteResponse struct {
	Existed bool `json:"existed"`
}

type routeJSON struct {
	Name            string `json:"name"`
	TargetNode      string `json:"targetNode"`
	DestinationCIDR string `json:"destinationCIDR"`
	Blackhole       bool   `json:"blackhole,omitempty"`
}

type listRoutesResponse struct {
	Routes []routeJSON `json:"routes"`
}

type listClustersResponse struct {
	Clusters []string `json:"clusters"`
}

type masterResponse struct {
	Address string `json:"address"`
}

// Shared by both sides: provider IDs, resource names, secrets.

// ProviderIDPrefix starts every simcloud provider ID.
const ProviderIDPrefix = "simcloud://"

// ParseProviderID splits "simcloud://<zone>/<id>" into zone and id. It also
// accepts "simcloud://<id>" (zone ""), the form
// cloudprovider.GetInstanceProviderID builds from an instance ID without a
// zone.
func ParseProviderID(providerID string) (zone, id string, err error) {
	rest, found := strings.CutPrefix(providerID, ProviderIDPrefix)
	if !found {
		return "", "", fmt.Errorf("simcloud: provider ID %q does not start with %q", providerID, ProviderIDPrefix)
	}
	zone, id, found = strings.Cut(rest, "/")
	if !found {
		zone, id = "", rest
	}
	if !validName(id) || strings.Contains(id, "/") {
		return "", "", fmt.Errorf("simcloud: provider ID %q has no valid instance ID", providerID)
	}
	return zone, id, nil
}

// Secret is a string that never prints: every fmt verb renders it as
// "[REDACTED]", and it marshals to JSON the same way. Use string(s) to read
// the value.
type Secret string

// Format implements fmt.Formatter.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, s.redacted()) }

// String implements fmt.Stringer.
func (s Secret) String() string { return s.redacted() }

// GoString implements fmt.GoStringer.
func (s Secret) GoString() string { return s.redacted() }

// MarshalJSON implements json.Marshaler; the value is never marshalled.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + s.redacted() + `"`), nil }

func (s Secret) redacted() string {
	if s == "" {
		return ""
	}
	return "[REDACTED]"
}

// validName reports whether s is a usable resource name: 1-253 characters
// from [A-Za-z0-9._-], so it is safe in a URL path segment unescaped.
func validName(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
		default:
			return false
		}
	}
	return true
}
