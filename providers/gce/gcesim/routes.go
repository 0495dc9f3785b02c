package gcesim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	compute "google.golang.org/api/compute/v1"
)

var routeFields = map[string]bool{"name": true, "network": true, "description": true, "destRange": true}

func routeField(r *compute.Route) func(string) string {
	return func(name string) string {
		switch name {
		case "name":
			return r.Name
		case "network":
			return r.Network
		case "description":
			return r.Description
		case "destRange":
			return r.DestRange
		}
		return ""
	}
}

func (s *Server) listRoutes(w http.ResponseWriter, r *http.Request, _ []string) {
	f, err := parseFilter(r.URL.Query().Get("filter"), routeFields)
	if err != nil {
		s.badRequest(w, err.Error())
		return
	}
	offset, size, ok := s.page(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	var all []*compute.Route
	for _, rt := range s.routes {
		if f.match(routeField(rt)) {
			c := *rt
			all = append(all, &c)
		}
	}
	s.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	list := &compute.RouteList{Kind: "compute#routeList", SelfLink: s.selfLink("global/routes"), NextPageToken: nextToken(offset, size, len(all))}
	if offset < len(all) {
		list.Items = all[offset:min(offset+size, len(all))]
	}
	writeJSON(w, http.StatusOK, list)
}

// insertRoute stores the route at once and answers a DONE operation, as Compute Engine does
// for a route once it has been created. A route whose next-hop instance does not exist is
// refused (400), one whose name is taken answers 409 alreadyExists.
func (s *Server) insertRoute(w http.ResponseWriter, r *http.Request, _ []string) {
	var rt compute.Route
	if err := json.NewDecoder(r.Body).Decode(&rt); err != nil {
		s.badRequest(w, "gcesim: routes.insert body: "+err.Error())
		return
	}
	if rt.Name == "" || rt.DestRange == "" || rt.NextHopInstance == "" {
		s.badRequest(w, fmt.Sprintf("gcesim: routes.insert needs name, destRange and nextHopInstance (the simulated next hop), got %+v", rt))
		return
	}
	// nextHopInstance: "zones/Z/instances/N" or a full URL ending in it.
	hop := rt.NextHopInstance
	if i := strings.Index(hop, "zones/"); i >= 0 {
		hop = hop[i:]
	}
	hp := strings.Split(hop, "/")
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(hp) != 4 || hp[0] != "zones" || hp[2] != "instances" || s.instances[hp[1]+"/"+hp[3]] == nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid value for field 'resource.nextHopInstance': '%s'. The instance does not exist.", rt.NextHopInstance), "invalid", "INVALID_ARGUMENT")
		return
	}
	if _, ok := s.routes[rt.Name]; ok {
		writeError(w, http.StatusConflict, fmt.Sprintf("The resource 'projects/%s/global/routes/%s' already exists", s.cfg.Project, rt.Name), "alreadyExists", "ALREADY_EXISTS")
		return
	}
	rt.Kind = "compute#route"
	rt.NextHopInstance = s.selfLink(hop)
	rt.SelfLink = s.selfLink("global/routes/" + rt.Name)
	s.nextID++
	rt.Id = s.nextID
	s.routes[rt.Name] = &rt
	writeJSON(w, http.StatusOK, s.doneOp("insert", rt.SelfLink))
}

func (s *Server) deleteRoute(w http.ResponseWriter, _ *http.Request, parts []string) {
	name := parts[2]
	s.mu.Lock()
	defer s.mu.Unlock()
	rt, ok := s.routes[name]
	if !ok {
		s.notFound(w, "global/routes/"+name)
		return
	}
	delete(s.routes, name)
	writeJSON(w, http.StatusOK, s.doneOp("delete", rt.SelfLink))
}

// doneOp records and returns a finished global operation; s.mu is held.
func (s *Server) doneOp(kind, target string) *compute.Operation {
	name := s.opName()
	op := &compute.Operation{
		Kind: "compute#operation", Name: name, OperationType: kind, Status: "DONE", Progress: 100,
		TargetLink: target, SelfLink: s.selfLink("global/operations/" + name),
	}
	s.ops[name] = op
	return op
}

func (s *Server) getOperation(w http.ResponseWriter, _ *http.Request, parts []string) {
	s.mu.Lock()
	op, ok := s.ops[parts[2]]
	var c compute.Operation
	if ok {
		c = *op
	}
	s.mu.Unlock()
	if !ok {
		s.notFound(w, "global/operations/"+parts[2])
		return
	}
	writeJSON(w, http.StatusOK, &c)
}
