package bench

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
)

// The purposes a read request on the wire is counted under
// (Steady.ReadsPerHourByPurpose): what the cloud was asked, not what the
// controllers called, so a batch counts once, under the controller whose
// Nodes it carries.
const (
	// PurposeStatus: node lookups that carry a Ready Node (the node
	// controller's status loop and initialisations).
	PurposeStatus = "status"
	// PurposeLifecycle: node lookups that carry only NotReady Nodes (the
	// lifecycle controller's InstanceExists / InstanceShutdown checks).
	PurposeLifecycle = "lifecycle"
	// PurposeList: ListInstances pages (list prefetch).
	PurposeList = "list"
	// PurposeRoutes: ListRoutes (the route controller).
	PurposeRoutes = "routes"
	// PurposeOther: any other read (load balancers, clusters).
	PurposeOther = "other"
)

// purposes counts read requests by purpose; the NotReady Nodes (by node
// name and instance ID) tell lifecycle lookups from status ones.
type purposes struct {
	mu       sync.Mutex
	notReady map[string]bool
	reads    map[string]int64
}

// markNotReady records keys (a node name, an instance ID) as a NotReady
// Node's.
func (p *purposes) markNotReady(keys ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.notReady == nil {
		p.notReady = map[string]bool{}
	}
	for _, k := range keys {
		p.notReady[k] = true
	}
}

// snapshot is the reads counted so far, by purpose.
func (p *purposes) snapshot() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.reads)
}

// count classifies one request about to be sent (writes are not counted).
// A batch request's body is read and put back.
func (p *purposes) count(req *http.Request) {
	if isWriteRequest(req) {
		return
	}
	var keys []string
	purpose := PurposeOther
	path := req.URL.Path
	switch {
	case path == "/v1/instances:batchGet":
		purpose = PurposeStatus
		if req.Body != nil {
			body, err := io.ReadAll(req.Body)
			_ = req.Body.Close()
			req.Body = io.NopCloser(bytes.NewReader(body))
			var b struct {
				IDs   []string `json:"ids"`
				Names []string `json:"names"`
			}
			if err == nil && json.Unmarshal(body, &b) == nil {
				keys = append(b.IDs, b.Names...)
			}
		}
	case path == "/v1/instances" && req.URL.Query().Has("name"):
		purpose, keys = PurposeStatus, []string{req.URL.Query().Get("name")}
	case path == "/v1/instances":
		purpose = PurposeList
	case strings.HasPrefix(path, "/v1/instances/"):
		purpose, keys = PurposeStatus, []string{strings.TrimPrefix(path, "/v1/instances/")}
	case strings.HasPrefix(path, "/v1/clusters/") && strings.HasSuffix(path, "/routes"):
		purpose = PurposeRoutes
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if purpose == PurposeStatus && len(keys) > 0 {
		all := true
		for _, k := range keys {
			all = all && p.notReady[k]
		}
		if all {
			purpose = PurposeLifecycle
		}
	}
	if p.reads == nil {
		p.reads = map[string]int64{}
	}
	p.reads[purpose]++
}
