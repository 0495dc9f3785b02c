package provider

import (
	"maps"
	"slices"
	"time"

	"github.com/cloudgate/cloudgate/limiter"
)

// API families: each has its own token bucket and circuit breaker, so reads
// queued behind a throttled cloud never hold back writes, and the reverse.
const (
	familyRead  = "read"
	familyWrite = "write"
)

// methodSet is the policy resolved from Config: one *method per wrapped
// method, so a wrapper reaches its own as g.m.instanceMetadata.
type methodSet struct {
	// InstancesV2
	instanceExists, instanceShutdown, instanceMetadata *method
	// Instances
	nodeAddresses, nodeAddressesByProviderID, instanceID, instanceType, instanceTypeByProviderID,
	currentNodeName, instanceExistsByProviderID, instanceShutdownByProviderID, addSSHKeyToAllInstances *method
	// Zones
	getZone, getZoneByProviderID, getZoneByNodeName *method
	// LoadBalancer
	getLoadBalancer, ensureLoadBalancer, updateLoadBalancer, ensureLoadBalancerDeleted *method
	// Routes
	listRoutes, createRoute, deleteRoute *method
	// Batched and listed instance reads
	batchInstanceStatus, listInstances *method
	// Clusters
	listClusters, master *method
}

// methodSpec is one method's place in the policy table.
type methodSpec struct {
	family string
	// defaultTTL caches a read's answers; 0 for writes and for reads that are
	// not worth caching.
	defaultTTL time.Duration
	// priority when tokens are scarce. Reads made for nodes that still carry
	// the uninitialized taint are raised to PriorityCritical by the caller.
	priority limiter.Priority
	// slot is where the resolved method goes.
	slot func(*methodSet) **method
}

// methodSpecs is the policy table: every cloud-facing method of the wrapped
// interfaces, and the only place their names are written. Config.Methods
// and the metrics use these names. GetLoadBalancerName is absent: it is
// computed locally and passed straight through.
//
// TTL choices: identity and placement of an instance (ID, type, zone) never
// change while it lives, so an hour; addresses and metadata rarely, 10 min;
// existence and shutdown state drive node deletion and taints, so short.
// Load balancer and route reads are invalidated by cloudgate's own writes,
// so their TTLs only bound how long an out-of-band change goes unseen
// (Azure uses 120 s for both).
var methodSpecs = map[string]methodSpec{
	// InstancesV2
	"InstanceExists":   {familyRead, time.Minute, limiter.PriorityBackground, func(s *methodSet) **method { return &s.instanceExists }},
	"InstanceShutdown": {familyRead, 30 * time.Second, limiter.PriorityBackground, func(s *methodSet) **method { return &s.instanceShutdown }},
	"InstanceMetadata": {familyRead, 10 * time.Minute, limiter.PriorityBackground, func(s *methodSet) **method { return &s.instanceMetadata }},
	// Instances
	"NodeAddresses":                {familyRead, 10 * time.Minute, limiter.PriorityBackground, func(s *methodSet) **method { return &s.nodeAddresses }},
	"NodeAddressesByProviderID":    {familyRead, 10 * time.Minute, limiter.PriorityBackground, func(s *methodSet) **method { return &s.nodeAddressesByProviderID }},
	"InstanceID":                   {familyRead, time.Hour, limiter.PriorityNormal, func(s *methodSet) **method { return &s.instanceID }},
	"InstanceType":                 {familyRead, time.Hour, limiter.PriorityNormal, func(s *methodSet) **method { return &s.instanceType }},
	"InstanceTypeByProviderID":     {familyRead, time.Hour, limiter.PriorityNormal, func(s *methodSet) **method { return &s.instanceTypeByProviderID }},
	"CurrentNodeName":              {familyRead, time.Hour, limiter.PriorityNormal, func(s *methodSet) **method { return &s.currentNodeName }},
	"InstanceExistsByProviderID":   {familyRead, time.Minute, limiter.PriorityBackground, func(s *methodSet) **method { return &s.instanceExistsByProviderID }},
	"InstanceShutdownByProviderID": {familyRead, 30 * time.Second, limiter.PriorityBackground, func(s *methodSet) **method { return &s.instanceShutdownByProviderID }},
	"AddSSHKeyToAllInstances":      {familyWrite, 0, limiter.PriorityCritical, func(s *methodSet) **method { return &s.addSSHKeyToAllInstances }},
	// Zones
	"GetZone":             {familyRead, time.Hour, limiter.PriorityNormal, func(s *methodSet) **method { return &s.getZone }},
	"GetZoneByProviderID": {familyRead, time.Hour, limiter.PriorityNormal, func(s *methodSet) **method { return &s.getZoneByProviderID }},
	"GetZoneByNodeName":   {familyRead, time.Hour, limiter.PriorityNormal, func(s *methodSet) **method { return &s.getZoneByNodeName }},
	// LoadBalancer
	"GetLoadBalancer":           {familyRead, 2 * time.Minute, limiter.PriorityNormal, func(s *methodSet) **method { return &s.getLoadBalancer }},
	"EnsureLoadBalancer":        {familyWrite, 0, limiter.PriorityCritical, func(s *methodSet) **method { return &s.ensureLoadBalancer }},
	"UpdateLoadBalancer":        {familyWrite, 0, limiter.PriorityCritical, func(s *methodSet) **method { return &s.updateLoadBalancer }},
	"EnsureLoadBalancerDeleted": {familyWrite, 0, limiter.PriorityCritical, func(s *methodSet) **method { return &s.ensureLoadBalancerDeleted }},
	// Routes
	"ListRoutes":  {familyRead, time.Minute, limiter.PriorityNormal, func(s *methodSet) **method { return &s.listRoutes }},
	"CreateRoute": {familyWrite, 0, limiter.PriorityCritical, func(s *methodSet) **method { return &s.createRoute }},
	"DeleteRoute": {familyWrite, 0, limiter.PriorityCritical, func(s *methodSet) **method { return &s.deleteRoute }},
	// Batched and listed instance reads (used by batching and list prefetch)
	"BatchInstanceStatus": {familyRead, 0, limiter.PriorityNormal, func(s *methodSet) **method { return &s.batchInstanceStatus }},
	"ListInstances":       {familyRead, 0, limiter.PriorityBackground, func(s *methodSet) **method { return &s.listInstances }},
	// Clusters
	"ListClusters": {familyRead, 10 * time.Minute, limiter.PriorityNormal, func(s *methodSet) **method { return &s.listClusters }},
	"Master":       {familyRead, 10 * time.Minute, limiter.PriorityNormal, func(s *methodSet) **method { return &s.master }},
}

func methodNames() []string {
	return slices.Sorted(maps.Keys(methodSpecs))
}

// DefaultTTLs returns the default TTL of every cached read, by method name
// (the keys of Config.Methods). Methods absent are not cached by default.
// The map is a copy.
func DefaultTTLs() map[string]time.Duration {
	ttls := map[string]time.Duration{}
	for name, spec := range methodSpecs {
		if spec.defaultTTL > 0 {
			ttls[name] = spec.defaultTTL
		}
	}
	return ttls
}
