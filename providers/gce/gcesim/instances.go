package gcesim

import (
	"net/http"
	"sort"
	"strconv"

	compute "google.golang.org/api/compute/v1"
)

var instanceFields = map[string]bool{"name": true, "status": true, "machineType": true}

func (s *Server) instanceJSON(in *Instance) *compute.Instance {
	nic := &compute.NetworkInterface{
		Kind: "compute#networkInterface", Name: "nic0", NetworkIP: in.InternalIP,
		Network: s.selfLink("global/networks/default"), Ipv6Address: in.IPv6,
	}
	if in.ExternalIP != "" {
		nic.AccessConfigs = []*compute.AccessConfig{{Kind: "compute#accessConfig", Name: "External NAT", Type: "ONE_TO_ONE_NAT", NatIP: in.ExternalIP}}
	}
	nics := []*compute.NetworkInterface{nic}
	if in.NoNetworkInterface {
		nics = nil
	}
	return &compute.Instance{
		Kind: "compute#instance", Id: in.ID, Name: in.Name, Status: in.Status,
		Zone:              s.selfLink("zones/" + in.Zone),
		MachineType:       s.selfLink("zones/" + in.Zone + "/machineTypes/" + in.MachineType),
		SelfLink:          s.selfLink("zones/" + in.Zone + "/instances/" + in.Name),
		NetworkInterfaces: nics,
	}
}

func (in *Instance) field(name string) string {
	switch name {
	case "name":
		return in.Name
	case "status":
		return in.Status
	case "machineType":
		return in.MachineType
	}
	return ""
}

func (s *Server) getInstance(w http.ResponseWriter, _ *http.Request, parts []string) {
	zone, name := parts[1], parts[3]
	s.mu.Lock()
	in, ok := s.instances[zone+"/"+name]
	var out *compute.Instance
	if ok {
		out = s.instanceJSON(in)
	}
	s.mu.Unlock()
	if !ok {
		s.notFound(w, "zones/"+zone+"/instances/"+name)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// matching returns the instances of zone ("" for all zones) that match f, sorted by zone and
// name (a stable order for paging).
func (s *Server) matching(zone string, f filter) []*compute.Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ins []*Instance
	for _, in := range s.instances {
		if (zone == "" || in.Zone == zone) && f.match(in.field) {
			ins = append(ins, in)
		}
	}
	sort.Slice(ins, func(i, j int) bool {
		if ins[i].Zone != ins[j].Zone {
			return ins[i].Zone < ins[j].Zone
		}
		return ins[i].Name < ins[j].Name
	})
	out := make([]*compute.Instance, len(ins))
	for i, in := range ins {
		out[i] = s.instanceJSON(in)
	}
	return out
}

func (s *Server) listInstances(w http.ResponseWriter, r *http.Request, parts []string) {
	zone := parts[1]
	if !s.hasZone(zone) {
		s.notFound(w, "zones/"+zone)
		return
	}
	f, err := parseFilter(r.URL.Query().Get("filter"), instanceFields)
	if err != nil {
		s.badRequest(w, err.Error())
		return
	}
	offset, size, ok := s.page(w, r)
	if !ok {
		return
	}
	all := s.matching(zone, f)
	list := &compute.InstanceList{Kind: "compute#instanceList", Id: "projects/" + s.cfg.Project + "/zones/" + zone + "/instances",
		SelfLink: s.selfLink("zones/" + zone + "/instances"), NextPageToken: nextToken(offset, size, len(all))}
	if offset < len(all) {
		list.Items = all[offset:min(offset+size, len(all))]
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) aggregatedInstances(w http.ResponseWriter, r *http.Request, _ []string) {
	f, err := parseFilter(r.URL.Query().Get("filter"), instanceFields)
	if err != nil {
		s.badRequest(w, err.Error())
		return
	}
	offset, size, ok := s.page(w, r)
	if !ok {
		return
	}
	all := s.matching("", f)
	var pageItems []*compute.Instance
	if offset < len(all) {
		pageItems = all[offset:min(offset+size, len(all))]
	}
	items := map[string]compute.InstancesScopedList{}
	for _, z := range s.cfg.Zones {
		items["zones/"+z] = compute.InstancesScopedList{Warning: &compute.InstancesScopedListWarning{
			Code: "NO_RESULTS_ON_PAGE", Message: "There are no results for scope 'zones/" + z + "' on this page."}}
	}
	for _, in := range pageItems {
		key := "zones/" + lastComponent(in.Zone)
		sl := items[key]
		sl.Warning = nil
		sl.Instances = append(sl.Instances, in)
		items[key] = sl
	}
	writeJSON(w, http.StatusOK, &compute.InstanceAggregatedList{
		Kind: "compute#instanceAggregatedList", Id: "projects/" + s.cfg.Project + "/aggregated/instances",
		Items: items, SelfLink: s.selfLink("aggregated/instances"), NextPageToken: nextToken(offset, size, len(all)),
	})
}

func lastComponent(s string) string {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			return s[i+1:]
		}
	}
	return s
}

// opName names the next operation.
func (s *Server) opName() string {
	s.nextID++
	return "operation-" + strconv.FormatUint(s.nextID, 10)
}
