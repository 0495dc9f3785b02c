package simcloud

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Instance is a simulated VM.
type Instance struct {
	// ID is the instance ID: 1-253 characters from [A-Za-z0-9._-].
	ID string
	// NodeName is the name of the instance's Node (same character set).
	NodeName string
	// Type is the instance type, e.g. "sim-standard-2".
	Type string
	// Zone and Region place the instance; Zone must not contain "/".
	Zone   string
	Region string
	// Addresses are the node's addresses (data only, never dialled).
	Addresses []v1.NodeAddress
	// Shutdown reports whether the instance is stopped (it still exists).
	Shutdown bool
	// Terminated: the instance is gone but still described, by ID and in
	// lists, as EC2 keeps describing a terminated instance for about an
	// hour (TerminateInstance); no lookup by node name finds it.
	Terminated bool
}

// ProviderID is the instance's provider ID, "simcloud://<zone>/<id>".
func (i Instance) ProviderID() string { return ProviderIDPrefix + i.Zone + "/" + i.ID }

func (i Instance) clone() Instance {
	i.Addresses = slices.Clone(i.Addresses)
	return i
}

func (i Instance) toJSON() instanceJSON {
	return instanceJSON{
		ID: i.ID, NodeName: i.NodeName, ProviderID: i.ProviderID(), Type: i.Type,
		Zone: i.Zone, Region: i.Region, Addresses: slices.Clone(i.Addresses), Shutdown: i.Shutdown,
		Terminated: i.Terminated,
	}
}

// LoadBalancer is a simulated load balancer.
type LoadBalancer struct {
	Name    string
	Cluster string
	// Hosts are the backend node names, sorted and without duplicates.
	Hosts []string
	Ports []LoadBalancerPort
	// IngressIP is assigned on creation from 203.0.113.0/24, then
	// 198.51.100.0/24 and 192.0.2.0/24 (lowest free address; data only) and
	// kept until the load balancer is deleted.
	IngressIP string
}

// LoadBalancerPort is one port of a load balancer.
type LoadBalancerPort struct {
	Name     string
	Protocol string
	Port     int32
	NodePort int32
}

func (lb LoadBalancer) clone() LoadBalancer {
	lb.Hosts = slices.Clone(lb.Hosts)
	lb.Ports = slices.Clone(lb.Ports)
	return lb
}

func (lb LoadBalancer) toJSON() loadBalancerJSON {
	out := loadBalancerJSON{Name: lb.Name, Cluster: lb.Cluster, Hosts: slices.Clone(lb.Hosts), IngressIP: lb.IngressIP}
	for _, p := range lb.Ports {
		out.Ports = append(out.Ports, lbPortJSON(p))
	}
	return out
}

// Route is a simulated route in a cluster's route table.
type Route struct {
	Cluster         string
	Name            string
	TargetNode      string
	DestinationCIDR string
	// Blackhole is computed when routes are read: true when no instance
	// has TargetNode as its node name.
	Blackhole bool
}

// lbPools are the ingress address pools, in allocation order.
var lbPools = []string{"203.0.113.", "198.51.100.", "192.0.2."}

const lbPoolSize = 254 // .1 to .254 of each /24

// store is the server's state; mu guards everything in it.
type store struct {
	mu sync.Mutex

	region string
	zones  []string

	instances map[string]*Instance // by ID
	byName    map[string]string    // node name -> ID
	order     []string             // IDs, sorted
	nextIndex map[string]int       // AddInstances prefix -> next index
	nextAddr  int                  // AddInstances address counter

	lbs   map[string]*LoadBalancer
	lbIPs map[int]string // pool slot -> LB name

	routes   map[string]map[string]*Route // cluster -> name -> route
	clusters map[string]bool

	log []WriteRecord
	seq int64

	// hidden are live instance IDs whose next lookup answers "not found"
	// (HideInstanceOnce).
	hidden map[string]bool
	// hiddenAt is when each hidden answer was given.
	hiddenAt map[string]time.Time
}

func newStore(cfg ServerConfig) *store {
	st := &store{
		region:    cfg.Region,
		zones:     cfg.Zones,
		instances: map[string]*Instance{},
		byName:    map[string]string{},
		nextIndex: map[string]int{},
		lbs:       map[string]*LoadBalancer{},
		lbIPs:     map[int]string{},
		routes:    map[string]map[string]*Route{},
		clusters:  map[string]bool{},
		hidden:    map[string]bool{},
		hiddenAt:  map[string]time.Time{},
	}
	for _, c := range cfg.Clusters {
		st.clusters[c] = true
	}
	return st
}

// record appends a write to the log; the caller holds mu.
func (st *store) record(method, target, requestID string, changed bool) {
	st.seq++
	st.log = append(st.log, WriteRecord{
		Seq: st.seq, Time: time.Now(), Method: method, Target: target, RequestID: requestID, Changed: changed,
	})
}

func (st *store) validateNew(inst Instance) error {
	if !validName(inst.ID) {
		return fmt.Errorf("simcloud: Instance.ID %q must match [A-Za-z0-9._-]{1,253}", inst.ID)
	}
	if !validName(inst.NodeName) {
		return fmt.Errorf("simcloud: Instance.NodeName %q must match [A-Za-z0-9._-]{1,253}", inst.NodeName)
	}
	if inst.Zone == "" || strings.Contains(inst.Zone, "/") {
		return fmt.Errorf("simcloud: Instance.Zone %q must be non-empty and contain no \"/\"", inst.Zone)
	}
	if _, dup := st.instances[inst.ID]; dup {
		return fmt.Errorf("simcloud: instance ID %q already exists", inst.ID)
	}
	if _, dup := st.byName[inst.NodeName]; dup {
		return fmt.Errorf("simcloud: node name %q already has an instance", inst.NodeName)
	}
	return nil
}

// insert adds a validated instance; the caller holds mu.
func (st *store) insert(inst Instance) {
	p := &inst
	st.instances[inst.ID] = p
	st.byName[inst.NodeName] = inst.ID
	i, _ := slices.BinarySearch(st.order, inst.ID)
	st.order = slices.Insert(st.order, i, inst.ID)
}

// AddInstance adds one instance. An empty Region becomes the server's
// region. It fails if the ID or node name is invalid or already taken.
func (s *Server) AddInstance(inst Instance) error {
	st := s.data
	st.mu.Lock()
	defer st.mu.Unlock()
	inst = inst.clone()
	if inst.Region == "" {
		inst.Region = st.region
	}
	if err := st.validateNew(inst); err != nil {
		return err
	}
	st.insert(inst)
	return nil
}

// instanceTypes are the types AddInstances cycles through.
var instanceTypes = []string{"sim-standard-2", "sim-standard-4", "sim-highmem-8"}

// AddInstances adds n instances and returns them. The k-th instance with
// this prefix (k counts from 0 and continues across calls with the same
// prefix) is:
//
//	NodeName  prefix-%05d of k
//	ID        i-prefix-%05d of k
//	Zone      Zones[k % len(Zones)], Region the server's region
//	Type      sim-standard-2, sim-standard-4 or sim-highmem-8 by (k / len(Zones)) % 3
//	Addresses InternalIP 10.x.y.z (unique per server, in creation order)
//	          and Hostname = NodeName
//
// It adds all n or none.
func (s *Server) AddInstances(n int, prefix string) ([]Instance, error) {
	if n < 0 {
		return nil, fmt.Errorf("simcloud: AddInstances: n must be >= 0, got %d", n)
	}
	if !validName(prefix) {
		return nil, fmt.Errorf("simcloud: AddInstances: prefix %q must match [A-Za-z0-9._-]{1,240}", prefix)
	}
	st := s.data
	st.mu.Lock()
	defer st.mu.Unlock()
	start := st.nextIndex[prefix]
	out := make([]Instance, 0, n)
	for k := start; k < start+n; k++ {
		name := fmt.Sprintf("%s-%05d", prefix, k)
		a := st.nextAddr + (k - start)
		inst := Instance{
			ID:       "i-" + name,
			NodeName: name,
			Type:     instanceTypes[(k/len(st.zones))%len(instanceTypes)],
			Zone:     st.zones[k%len(st.zones)],
			Region:   st.region,
			Addresses: []v1.NodeAddress{
				{Type: v1.NodeInternalIP, Address: fmt.Sprintf("10.%d.%d.%d", (a/(254*256))%256, (a/254)%256, a%254+1)},
				{Type: v1.NodeHostName, Address: name},
			},
		}
		if err := st.validateNew(inst); err != nil {
			return nil, fmt.Errorf("simcloud: AddInstances: %w", err)
		}
		out = append(out, inst)
	}
	for _, inst := range out {
		st.insert(inst.clone())
	}
	st.nextIndex[prefix] = start + n
	st.nextAddr += n
	return out, nil
}

// DeleteInstance removes an instance and reports whether it existed.
func (s *Server) DeleteInstance(id string) bool {
	st := s.data
	st.mu.Lock()
	defer st.mu.Unlock()
	inst, found := st.instances[id]
	if !found {
		return false
	}
	delete(st.instances, id)
	delete(st.hidden, id)
	delete(st.byName, inst.NodeName)
	if i, found := slices.BinarySearch(st.order, id); found {
		st.order = slices.Delete(st.order, i, i+1)
	}
	return true
}

// TerminateInstance terminates an instance and reports whether it existed:
// it stays described by ID and in lists, marked terminated, and its node
// name no longer finds it (Instance.Terminated).
func (s *Server) TerminateInstance(id string) bool {
	st := s.data
	st.mu.Lock()
	defer st.mu.Unlock()
	inst, found := st.instances[id]
	if !found {
		return false
	}
	inst.Terminated = true
	if st.byName[inst.NodeName] == id {
		delete(st.byName, inst.NodeName)
	}
	return true
}

// HideInstanceOnce makes the next lookup of a live instance (by ID, by
// name, in a batch or in a list page) answer as if it did not exist, once:
// the eventually consistent "not found" a real cloud sometimes gives. It
// reports whether the instance exists.
func (s *Server) HideInstanceOnce(id string) bool {
	st := s.data
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, found := st.instances[id]; !found {
		return false
	}
	st.hidden[id] = true
	return true
}

// takeHidden reports whether id's lookup is to be hidden, and consumes it;
// the caller holds mu.
func (st *store) takeHidden(id string) bool {
	if !st.hidden[id] {
		return false
	}
	delete(st.hidden, id)
	st.hiddenAt[id] = time.Now()
	return true
}

// HiddenAnsweredAt reports when the one-shot "not found" armed by
// HideInstanceOnce was given for instance id, if it was.
func (s *Server) HiddenAnsweredAt(id string) (time.Time, bool) {
	st := s.data
	st.mu.Lock()
	defer st.mu.Unlock()
	t, ok := st.hiddenAt[id]
	return t, ok
}

// SetShutdown stops (true) or starts (false) an instance and reports
// whether it exists.
func (s *Server) SetShutdown(id string, shutdown bool) bool {
	st := s.data
	st.mu.Lock()
	defer st.mu.Unlock()
	inst, found := st.instances[id]
	if found {
		inst.Shutdown = shutdown
	}
	return found
}

// Instance returns a copy of an instance by ID.
func (s *Server) Instance(id string) (Instance, bool) {
	st := s.data
	st.mu.Lock()
	defer st.mu.Unlock()
	inst, found := st.instances[id]
	if !found {
		return Instance{}, false
	}
	return inst.clone(), true
}

// InstanceByNodeName returns a copy of the instance of a node.
func (s *Server) InstanceByNodeName(nodeName string) (Instance, bool) {
	st := s.data
	st.mu.Lock()
	defer st.mu.Unlock()
	id, found := st.byName[nodeName]
	if !found {
		return Instance{}, false
	}
	return st.instances[id].clone(), true
}

// Instances returns copies of all instances, sorted by ID.
func (s *Server) Instances() []Instance {
	st := s.data
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make([]Instance, 0, len(st.order))
	for _, id := range st.order {
		out = append(out, st.instances[id].clone())
	}
	return out
}

// LoadBalancers returns copies of all load balancers, sorted by name.
func (s *Server) LoadBalancers() []LoadBalancer {
	st := s.data
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make([]LoadBalancer, 0, len(st.lbs))
	for _, lb := range st.lbs {
		out = append(out, lb.clone())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Routes returns copies of a cluster's routes, sorted by name, with
// Blackhole computed.
func (s *Server) Routes(cluster string) []Route {
	st := s.data
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.listRoutes(cluster)
}

// listRoutes is Routes; the caller holds mu.
func (st *store) listRoutes(cluster string) []Route {
	out := make([]Route, 0, len(st.routes[cluster]))
	for _, r := range st.routes[cluster] {
		rt := *r
		_, alive := st.byName[rt.TargetNode]
		rt.Blackhole = !alive
		out = append(out, rt)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Clusters returns the known cluster names, sorted.
func (s *Server) Clusters() []string {
	st := s.data
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.clusterNames()
}

func (st *store) clusterNames() []string {
	out := make([]string, 0, len(st.clusters))
	for c := range st.clusters {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// AddRoute puts a route into a cluster's route table directly, as setup
// (like AddInstances): no quota is charged and nothing is written to the
// write log. It fails on an invalid name or a conflicting route.
func (s *Server) AddRoute(rt Route) error {
	if !validName(rt.Cluster) || !validName(rt.Name) || rt.TargetNode == "" {
		return fmt.Errorf("simcloud: AddRoute: cluster %q, name %q and target node %q must be valid names", rt.Cluster, rt.Name, rt.TargetNode)
	}
	st := s.data
	st.mu.Lock()
	defer st.mu.Unlock()
	table := st.routes[rt.Cluster]
	if table == nil {
		table = map[string]*Route{}
		st.routes[rt.Cluster] = table
	}
	if _, dup := table[rt.Name]; dup {
		return fmt.Errorf("simcloud: AddRoute: route %q already exists in cluster %q", rt.Name, rt.Cluster)
	}
	rt.Blackhole = false
	table[rt.Name] = &rt
	st.clusters[rt.Cluster] = true
	return nil
}
