package provider

import (
	"sort"
	"time"

	"github.com/cloudgate/cloudgate/limiter"
)

// API families: each has its own token bucket and circuit breaker, so reads
// queued behind a throttled cloud never hold back writes, and the reverse.
const (
	familyRead  = "read"
	familyWrite = "write"
)

// methodSpec is one method's place in the policy table.
type methodSpec struct {
	family string
	// defaultTTL caches a read's answers; 0 for writes and for reads that are
	// not worth caching.
	defaultTTL time.Duration
	// priority when tokens are scarce. Reads made for nodes that still carry
	// the uninitialized taint are raised to PriorityCritical by the caller.
	priority limiter.Priority
}

// methodSpecs is the policy table: every cloud-facing method of the wrapped
// interfaces. GetLoadBalancerName is absent: it is computed locally and
// passed straight through.
//
// TTL choices: identity and placement of an instance (ID, type, zone) never
// change while it lives, so an hour; addresses and metadata rarely, 10 min;
// existence and shutdown state drive node deletion and taints, so short.
// Load balancer and route reads are invalidated by cloudgate's own writes,
// so their TTLs only bound how long an out-of-band change goes unseen
// (Azure uses 120 s for both).
var methodSpecs = map[string]methodSpec{
	// InstancesV2
	"InstanceExists":   {familyRead, time.Minute, limiter.PriorityBackground},
	"InstanceShutdown": {familyRead, 30 * time.Second, limiter.PriorityBackground},
	"InstanceMetadata": {familyRead, 10 * time.Minute, limiter.PriorityBackground},
	// Instances
	"NodeAddresses":                {familyRead, 10 * time.Minute, limiter.PriorityBackground},
	"NodeAddressesByProviderID":    {familyRead, 10 * time.Minute, limiter.PriorityBackground},
	"InstanceID":                   {familyRead, time.Hour, limiter.PriorityNormal},
	"InstanceType":                 {familyRead, time.Hour, limiter.PriorityNormal},
	"InstanceTypeByProviderID":     {familyRead, time.Hour, limiter.PriorityNormal},
	"CurrentNodeName":              {familyRead, time.Hour, limiter.PriorityNormal},
	"InstanceExistsByProviderID":   {familyRead, time.Minute, limiter.PriorityBackground},
	"InstanceShutdownByProviderID": {familyRead, 30 * time.Second, limiter.PriorityBackground},
	"AddSSHKeyToAllInstances":      {familyWrite, 0, limiter.PriorityCritical},
	// Zones
	"GetZone":             {familyRead, time.Hour, limiter.PriorityNormal},
	"GetZoneByProviderID": {familyRead, time.Hour, limiter.PriorityNormal},
	"GetZoneByNodeName":   {familyRead, time.Hour, limiter.PriorityNormal},
	// LoadBalancer
	"GetLoadBalancer":           {familyRead, 2 * time.Minute, limiter.PriorityNormal},
	"EnsureLoadBalancer":        {familyWrite, 0, limiter.PriorityCritical},
	"UpdateLoadBalancer":        {familyWrite, 0, limiter.PriorityCritical},
	"EnsureLoadBalancerDeleted": {familyWrite, 0, limiter.PriorityCritical},
	// Routes
	"ListRoutes":  {familyRead, time.Minute, limiter.PriorityNormal},
	"CreateRoute": {familyWrite, 0, limiter.PriorityCritical},
	"DeleteRoute": {familyWrite, 0, limiter.PriorityCritical},
	// Batched and listed instance reads (used by batching and list prefetch)
	"BatchInstanceStatus": {familyRead, 0, limiter.PriorityNormal},
	"ListInstances":       {familyRead, 0, limiter.PriorityBackground},
	// Clusters
	"ListClusters": {familyRead, 10 * time.Minute, limiter.PriorityNormal},
	"Master":       {familyRead, 10 * time.Minute, limiter.PriorityNormal},
}

func methodNames() []string {
	names := make([]string, 0, len(methodSpecs))
	for n := range methodSpecs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
