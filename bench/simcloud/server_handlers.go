package simcloud

import (
	"encoding/base64"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
)

func (s *Server) getInstance(r *http.Request, _ call) reply {
	id := r.PathValue("id")
	st := s.data
	st.mu.Lock()
	defer st.mu.Unlock()
	inst, found := st.instances[id]
	if found && st.takeHidden(id) {
		s.addHidden()
		found = false
	}
	if !found {
		return fail(http.StatusNotFound, CodeInstanceNotFound, "instance %q not found", id)
	}
	return ok(inst.toJSON())
}

// hide is takeHidden that also counts the hidden answer; the caller holds mu.
func (st *store) hide(s *Server, id string) bool {
	if !st.takeHidden(id) {
		return false
	}
	s.addHidden()
	return true
}

func (s *Server) getInstanceByName(r *http.Request, _ call) reply {
	name := r.URL.Query().Get("name")
	if name == "" {
		return fail(http.StatusBadRequest, CodeBadRequest, "name must not be empty")
	}
	st := s.data
	st.mu.Lock()
	defer st.mu.Unlock()
	id, found := st.byName[name]
	if found && st.takeHidden(id) {
		s.addHidden()
		found = false
	}
	if !found {
		return fail(http.StatusNotFound, CodeInstanceNotFound, "no instance for node %q", name)
	}
	return ok(st.instances[id].toJSON())
}

func (s *Server) batchGetInstances(r *http.Request, _ call) reply {
	var req batchGetRequest
	if err := decodeBody(r, &req); err != nil {
		return fail(http.StatusBadRequest, CodeBadRequest, "%v", err)
	}
	n := len(req.IDs) + len(req.Names)
	if n > s.cfg.MaxBatchSize {
		return fail(http.StatusBadRequest, CodeBadRequest, "batch of %d items exceeds MaxBatchSize %d", n, s.cfg.MaxBatchSize)
	}
	resp := batchGetResponse{ByID: make([]batchResult, len(req.IDs)), ByName: make([]batchResult, len(req.Names))}
	st := s.data
	st.mu.Lock()
	for i, id := range req.IDs {
		if inst, found := st.instances[id]; found && !st.hide(s, id) {
			j := inst.toJSON()
			resp.ByID[i] = batchResult{Found: true, Instance: &j}
		}
	}
	for i, name := range req.Names {
		if id, found := st.byName[name]; found && !st.hide(s, id) {
			j := st.instances[id].toJSON()
			resp.ByName[i] = batchResult{Found: true, Instance: &j}
		}
	}
	st.mu.Unlock()
	s.addItems(int64(n), 0)
	return ok(resp)
}

// Page tokens are the last ID of the previous page, base64url-encoded: a
// list sees every instance that exists from its first to its last page
// exactly once, even while others are added or deleted.
func (s *Server) listInstances(r *http.Request, _ call) reply {
	q := r.URL.Query()
	size := s.cfg.ListPageSize
	if v := q.Get("pageSize"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fail(http.StatusBadRequest, CodeBadRequest, "pageSize %q must be a non-negative integer", v)
		}
		if n > 0 && n < size {
			size = n
		}
	}
	after := ""
	if tok := q.Get("pageToken"); tok != "" {
		b, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil || len(b) == 0 {
			return fail(http.StatusBadRequest, CodeBadRequest, "invalid pageToken")
		}
		after = string(b)
	}
	st := s.data
	st.mu.Lock()
	i := 0
	if after != "" {
		var found bool
		i, found = slices.BinarySearch(st.order, after)
		if found {
			i++
		}
	}
	// state=alive leaves terminated instances out, filtered before the page
	// is cut (as EC2's instance-state-name filter is): they take no room.
	alive := q.Get("state") == "alive"
	resp := listInstancesResponse{Instances: make([]instanceJSON, 0, min(size, len(st.order)-i))}
	end, taken := i, 0
	for ; end < len(st.order) && taken < size; end++ {
		id := st.order[end]
		if alive && st.instances[id].Terminated {
			continue
		}
		taken++
		if st.hide(s, id) {
			continue
		}
		resp.Instances = append(resp.Instances, st.instances[id].toJSON())
	}
	if end < len(st.order) && end > i {
		resp.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte(st.order[end-1]))
	}
	st.mu.Unlock()
	s.addItems(0, int64(len(resp.Instances)))
	return ok(resp)
}

func (s *Server) getLoadBalancer(r *http.Request, _ call) reply {
	name := r.PathValue("name")
	st := s.data
	st.mu.Lock()
	defer st.mu.Unlock()
	lb, found := st.lbs[name]
	if !found {
		return fail(http.StatusNotFound, CodeLoadBalancerNotFound, "load balancer %q not found", name)
	}
	return ok(lb.toJSON())
}

// ensureLoadBalancer creates or updates a load balancer to the requested
// hosts and ports. It answers the load balancer.
func (s *Server) ensureLoadBalancer(r *http.Request, c call) reply {
	name := r.PathValue("name")
	if !validName(name) {
		return fail(http.StatusBadRequest, CodeBadRequest, "load balancer name %q must match [A-Za-z0-9._-]{1,253}", name)
	}
	var req ensureLBRequest
	if err := decodeBody(r, &req); err != nil {
		return fail(http.StatusBadRequest, CodeBadRequest, "%v", err)
	}
	hosts := slices.Clone(req.Hosts)
	slices.Sort(hosts)
	hosts = slices.Compact(hosts)
	ports := make([]LoadBalancerPort, 0, len(req.Ports))
	for _, p := range req.Ports {
		if p.Port <= 0 || p.Port > 65535 {
			return fail(http.StatusBadRequest, CodeBadRequest, "port %d out of range", p.Port)
		}
		ports = append(ports, LoadBalancerPort(p))
	}

	st := s.data
	st.mu.Lock()
	defer st.mu.Unlock()
	lb, found := st.lbs[name]
	if !found {
		slot := -1
		for i := range len(lbPools) * lbPoolSize {
			if _, used := st.lbIPs[i]; !used {
				slot = i
				break
			}
		}
		if slot < 0 {
			return fail(http.StatusConflict, CodeConflict, "ingress address pool exhausted")
		}
		st.lbIPs[slot] = name
		lb = &LoadBalancer{Name: name, IngressIP: lbPools[slot/lbPoolSize] + strconv.Itoa(slot%lbPoolSize+1)}
		st.lbs[name] = lb
	}
	changed := !found || lb.Cluster != req.Cluster || !slices.Equal(lb.Hosts, hosts) || !slices.Equal(lb.Ports, ports)
	lb.Cluster, lb.Hosts, lb.Ports = req.Cluster, hosts, ports
	st.record(MethodEnsureLoadBalancer, name, c.requestID, changed)
	return ok(lb.toJSON())
}

func (s *Server) deleteLoadBalancer(r *http.Request, c call) reply {
	name := r.PathValue("name")
	st := s.data
	st.mu.Lock()
	defer st.mu.Unlock()
	_, found := st.lbs[name]
	if found {
		delete(st.lbs, name)
		for slot, owner := range st.lbIPs {
			if owner == name {
				delete(st.lbIPs, slot)
			}
		}
	}
	st.record(MethodDeleteLoadBalancer, name, c.requestID, found)
	return ok(deleteResponse{Existed: found})
}

func (s *Server) listClusters(*http.Request, call) reply {
	st := s.data
	st.mu.Lock()
	defer st.mu.Unlock()
	return ok(listClustersResponse{Clusters: st.clusterNames()})
}

// getMaster answers a hostname under the reserved .invalid TLD: data only.
func (s *Server) getMaster(r *http.Request, _ call) reply {
	cluster := r.PathValue("cluster")
	st := s.data
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.clusters[cluster] {
		return fail(http.StatusNotFound, CodeClusterNotFound, "cluster %q not found", cluster)
	}
	return ok(masterResponse{Address: "api." + cluster + ".simcloud.invalid"})
}

// listRoutes answers a cluster's routes; an unknown cluster has none.
func (s *Server) listRoutes(r *http.Request, _ call) reply {
	cluster := r.PathValue("cluster")
	st := s.data
	st.mu.Lock()
	routes := st.listRoutes(cluster)
	st.mu.Unlock()
	resp := listRoutesResponse{Routes: make([]routeJSON, 0, len(routes))}
	for _, rt := range routes {
		resp.Routes = append(resp.Routes, routeJSON{
			Name: rt.Name, TargetNode: rt.TargetNode, DestinationCIDR: rt.DestinationCIDR, Blackhole: rt.Blackhole,
		})
	}
	return ok(resp)
}

// createRoute adds a route. An identical route under the same name is
// confirmed (200, logged unchanged); a different route under the same
// name, or another route to the same destination, is 409.
func (s *Server) createRoute(r *http.Request, c call) reply {
	cluster := r.PathValue("cluster")
	if !validName(cluster) {
		return fail(http.StatusBadRequest, CodeBadRequest, "cluster name %q must match [A-Za-z0-9._-]{1,253}", cluster)
	}
	var req routeJSON
	if err := decodeBody(r, &req); err != nil {
		return fail(http.StatusBadRequest, CodeBadRequest, "%v", err)
	}
	if !validName(req.Name) {
		return fail(http.StatusBadRequest, CodeBadRequest, "route name %q must match [A-Za-z0-9._-]{1,253}", req.Name)
	}
	if req.TargetNode == "" {
		return fail(http.StatusBadRequest, CodeBadRequest, "targetNode must not be empty")
	}
	if _, err := netip.ParsePrefix(req.DestinationCIDR); err != nil {
		return fail(http.StatusBadRequest, CodeBadRequest, "destinationCIDR %q: %v", req.DestinationCIDR, err)
	}
	st := s.data
	st.mu.Lock()
	defer st.mu.Unlock()
	table := st.routes[cluster]
	if old, found := table[req.Name]; found {
		if old.TargetNode != req.TargetNode || old.DestinationCIDR != req.DestinationCIDR {
			return fail(http.StatusConflict, CodeConflict, "route %q exists with target %q and destination %q",
				req.Name, old.TargetNode, old.DestinationCIDR)
		}
		st.record(MethodCreateRoute, cluster+"/"+req.Name, c.requestID, false)
		return reply{http.StatusOK, routeJSON{Name: old.Name, TargetNode: old.TargetNode, DestinationCIDR: old.DestinationCIDR}}
	}
	for _, other := range table {
		if other.DestinationCIDR == req.DestinationCIDR {
			return fail(http.StatusConflict, CodeConflict, "route %q already has destination %q", other.Name, req.DestinationCIDR)
		}
	}
	if table == nil {
		table = map[string]*Route{}
		st.routes[cluster] = table
	}
	table[req.Name] = &Route{Cluster: cluster, Name: req.Name, TargetNode: req.TargetNode, DestinationCIDR: req.DestinationCIDR}
	st.clusters[cluster] = true
	st.record(MethodCreateRoute, cluster+"/"+req.Name, c.requestID, true)
	return reply{http.StatusCreated, routeJSON{Name: req.Name, TargetNode: req.TargetNode, DestinationCIDR: req.DestinationCIDR}}
}

// deleteRoute removes a route; deleting an absent route is confirmed
// (200, existed false, logged unchanged).
func (s *Server) deleteRoute(r *http.Request, c call) reply {
	cluster, name := r.PathValue("cluster"), r.PathValue("name")
	st := s.data
	st.mu.Lock()
	defer st.mu.Unlock()
	_, found := st.routes[cluster][name]
	if found {
		delete(st.routes[cluster], name)
	}
	st.record(MethodDeleteRoute, cluster+"/"+name, c.requestID, found)
	return ok(deleteResponse{Existed: found})
}
