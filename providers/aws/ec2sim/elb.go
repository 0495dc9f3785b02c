package ec2sim

import (
	"encoding/xml"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The load balancing Query APIs a [ServiceOverride] may send here: classic
// Elastic Load Balancing and ELBv2 (network load balancers). A request's
// Version says which API it is for, since both name their actions alike.
const (
	ELBAPIVersion   = "2012-06-01"
	ELBv2APIVersion = "2015-12-01"
	elbNamespace    = "http://elasticloadbalancing.amazonaws.com/doc/" + ELBAPIVersion + "/"
	elbv2Namespace  = "http://elasticloadbalancing.amazonaws.com/doc/" + ELBv2APIVersion + "/"
)

// ELBAction and ELBv2Action are the names an ELB or ELBv2 action is counted
// (Stats), throttled (Config.Buckets) and delayed (Latency.Actions) under:
// the two APIs share action names such as DescribeLoadBalancers. A request
// for another Query API (a Version ec2sim does not simulate) is counted
// under "other:" and its action.
func ELBAction(action string) string   { return "elb:" + action }
func ELBv2Action(action string) string { return "elbv2:" + action }

const otherAPIPrefix = "other:"

// IsEC2Action reports whether a Stats key counts an EC2 action, not one of
// the load balancing APIs (their own API, with their own quota) or of an
// API ec2sim does not simulate: what an EC2 figure may sum.
func IsEC2Action(key string) bool {
	for _, p := range []string{ELBAction(""), ELBv2Action(""), otherAPIPrefix} {
		if strings.HasPrefix(key, p) {
			return false
		}
	}
	return true
}

// api is the Query API one request is for.
type api int

const (
	apiEC2 api = iota
	apiELB
	apiELBv2
	apiOther // any other Version: not simulated
)

func (a api) key(action string) string {
	switch a {
	case apiELB:
		return ELBAction(action)
	case apiELBv2:
		return ELBv2Action(action)
	case apiOther:
		return otherAPIPrefix + action
	}
	return action
}

// members reads an awsquery list: prefix.member.1, prefix.member.2, ...
func members(form url.Values, prefix string) []string {
	return list(form, prefix+".member")
}

// queryResponse is the answer document of the load balancing Query APIs:
// <ActionResponse><ActionResult>...</ActionResult><ResponseMetadata>.
type queryResponse struct {
	XMLName   xml.Name
	XMLNS     string `xml:"xmlns,attr"`
	Result    any
	RequestID string `xml:"ResponseMetadata>RequestId"`
}

// result is an ActionResult element with the given fields inside.
type result struct {
	XMLName xml.Name
	Fields  any
}

func (r result) MarshalXML(e *xml.Encoder, start xml.StartElement) error {
	start.Name = r.XMLName
	if r.Fields == nil {
		return e.EncodeElement(struct{}{}, start)
	}
	return e.EncodeElement(r.Fields, start)
}

func (s *Server) answer(ns, action string, fields any) queryResponse {
	return queryResponse{
		XMLName:   xml.Name{Local: action + "Response"},
		XMLNS:     ns,
		Result:    result{XMLName: xml.Name{Local: action + "Result"}, Fields: fields},
		RequestID: s.requestID(),
	}
}

// classicLB is one classic load balancer.
type classicLB struct {
	name, dns, scheme, vpc string
	created                time.Time
	listeners              []elbListener // by load balancer port
	subnets, zones, groups []string
	instances              []string // sorted
	health                 elbHealthCheck
	attrs                  elbAttributes
	tags                   map[string]string
}

type elbListener struct {
	Protocol         string `xml:"Protocol"`
	LoadBalancerPort int    `xml:"LoadBalancerPort"`
	InstanceProtocol string `xml:"InstanceProtocol,omitempty"`
	InstancePort     int    `xml:"InstancePort"`
	SSLCertificateID string `xml:"SSLCertificateId,omitempty"`
}

type elbHealthCheck struct {
	Target             string `xml:"Target"`
	Interval           int    `xml:"Interval"`
	Timeout            int    `xml:"Timeout"`
	UnhealthyThreshold int    `xml:"UnhealthyThreshold"`
	HealthyThreshold   int    `xml:"HealthyThreshold"`
}

// elbAttributes are a classic load balancer's attributes, as
// DescribeLoadBalancerAttributes answers them.
type elbAttributes struct {
	AccessLog struct {
		Enabled        bool   `xml:"Enabled"`
		S3BucketName   string `xml:"S3BucketName,omitempty"`
		EmitInterval   int    `xml:"EmitInterval,omitempty"`
		S3BucketPrefix string `xml:"S3BucketPrefix,omitempty"`
	} `xml:"AccessLog"`
	ConnectionDraining struct {
		Enabled bool `xml:"Enabled"`
		Timeout int  `xml:"Timeout"`
	} `xml:"ConnectionDraining"`
	ConnectionSettings struct {
		IdleTimeout int `xml:"IdleTimeout"`
	} `xml:"ConnectionSettings"`
	CrossZoneLoadBalancing struct {
		Enabled bool `xml:"Enabled"`
	} `xml:"CrossZoneLoadBalancing"`
	AdditionalAttributes []keyValueXML `xml:"AdditionalAttributes>member"`
}

type keyValueXML struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

// defaultELBAttributes are what a new classic load balancer has: AWS's
// documented defaults, including a connection draining timeout and a
// desync mitigation mode, which a caller's attributes without those fields
// never equal.
func defaultELBAttributes() elbAttributes {
	var a elbAttributes
	a.ConnectionDraining.Timeout = 300
	a.ConnectionSettings.IdleTimeout = 60
	a.AdditionalAttributes = []keyValueXML{{Key: "elb.http.desyncmitigationmode", Value: "defensive"}}
	return a
}

// createdTime is every load balancer's and target group's creation time,
// fixed so that answers repeat from run to run.
var createdTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func elbNotFound(name string) *apiError {
	return badRequest("LoadBalancerNotFound", "There is no ACTIVE Load Balancer named '%s'", name)
}

// serveELB answers one classic Elastic Load Balancing action; any other is
// InvalidAction.
func (s *Server) serveELB(action string, r *http.Request) (any, int, *apiError) {
	f := r.Form
	s.mu.Lock()
	defer s.mu.Unlock()
	switch action {
	case "DescribeLoadBalancers":
		return s.describeELBs(f)
	case "CreateLoadBalancer":
		return s.createELB(f)
	case "DeleteLoadBalancer", "DescribeLoadBalancerAttributes", "ModifyLoadBalancerAttributes", "ConfigureHealthCheck",
		"RegisterInstancesWithLoadBalancer", "DeregisterInstancesFromLoadBalancer", "CreateLoadBalancerListeners",
		"DeleteLoadBalancerListeners", "AttachLoadBalancerToSubnets", "DetachLoadBalancerFromSubnets",
		"ApplySecurityGroupsToLoadBalancer", "AddTags":
		return s.changeELB(action, f)
	}
	return nil, 0, badRequest("InvalidAction", "The action %s is not valid for this web service.", action)
}

// changeELB answers the actions on one named classic load balancer (s.mu
// held).
func (s *Server) changeELB(action string, f url.Values) (any, int, *apiError) {
	name := f.Get("LoadBalancerName")
	if action == "AddTags" {
		names := members(f, "LoadBalancerNames")
		if len(names) != 1 {
			return nil, 0, badRequest("ValidationError", "LoadBalancerNames must name one load balancer")
		}
		name = names[0]
	}
	if name == "" {
		return nil, 0, badRequest("ValidationError", "LoadBalancerName is required")
	}
	lb := s.elbs[name]
	if lb == nil {
		if action == "DeleteLoadBalancer" {
			// Deleting a load balancer that does not exist succeeds.
			return s.answer(elbNamespace, action, nil), 0, nil
		}
		return nil, 0, elbNotFound(name)
	}
	switch action {
	case "DeleteLoadBalancer":
		delete(s.elbs, name)
		return s.answer(elbNamespace, action, nil), 1, nil
	case "DescribeLoadBalancerAttributes":
		return s.answer(elbNamespace, action, struct {
			A elbAttributes `xml:"LoadBalancerAttributes"`
		}{lb.attrs}), 1, nil
	case "ModifyLoadBalancerAttributes":
		if aerr := modifyELBAttributes(&lb.attrs, f); aerr != nil {
			return nil, 0, aerr
		}
		return s.answer(elbNamespace, action, struct {
			Name string        `xml:"LoadBalancerName"`
			A    elbAttributes `xml:"LoadBalancerAttributes"`
		}{name, lb.attrs}), 1, nil
	case "ConfigureHealthCheck":
		hc, aerr := parseHealthCheck(f)
		if aerr != nil {
			return nil, 0, aerr
		}
		lb.health = hc
		return s.answer(elbNamespace, action, struct {
			H elbHealthCheck `xml:"HealthCheck"`
		}{hc}), 1, nil
	case "RegisterInstancesWithLoadBalancer", "DeregisterInstancesFromLoadBalancer":
		var ids []string
		for i := 1; ; i++ {
			id, ok := f["Instances.member."+strconv.Itoa(i)+".InstanceId"]
			if !ok {
				break
			}
			ids = append(ids, id[0])
		}
		if len(ids) == 0 {
			return nil, 0, badRequest("ValidationError", "Instances is required")
		}
		for _, id := range ids {
			if s.instances[id] == nil {
				return nil, 0, badRequest("InvalidInstance", "The requested instance %s is not found", id)
			}
		}
		for _, id := range ids {
			has := slices.Contains(lb.instances, id)
			switch {
			case action == "RegisterInstancesWithLoadBalancer" && !has:
				lb.instances = append(lb.instances, id)
			case action == "DeregisterInstancesFromLoadBalancer" && has:
				lb.instances = slices.DeleteFunc(lb.instances, func(x string) bool { return x == id })
			}
		}
		sort.Strings(lb.instances)
		return s.answer(elbNamespace, action, struct {
			I []instanceRefXML `xml:"Instances>member"`
		}{instanceRefs(lb.instances)}), len(ids), nil
	case "CreateLoadBalancerListeners":
		ls, aerr := parseELBListeners(f)
		if aerr != nil {
			return nil, 0, aerr
		}
		for _, l := range ls {
			if i := slices.IndexFunc(lb.listeners, func(x elbListener) bool { return x.LoadBalancerPort == l.LoadBalancerPort }); i >= 0 {
				if lb.listeners[i] != l {
					return nil, 0, badRequest("DuplicateListener", "A listener already exists for %s with LoadBalancerPort %d, but with a different InstancePort, Protocol, or SSLCertificateId", name, l.LoadBalancerPort)
				}
				continue
			}
			lb.listeners = append(lb.listeners, l)
		}
		sortListeners(lb.listeners)
		return s.answer(elbNamespace, action, nil), len(ls), nil
	case "DeleteLoadBalancerListeners":
		ports := members(f, "LoadBalancerPorts")
		for _, p := range ports {
			n, err := strconv.Atoi(p)
			if err != nil {
				return nil, 0, badRequest("ValidationError", "LoadBalancerPorts: %q is not a port", p)
			}
			lb.listeners = slices.DeleteFunc(lb.listeners, func(x elbListener) bool { return x.LoadBalancerPort == n })
		}
		return s.answer(elbNamespace, action, nil), len(ports), nil
	case "AttachLoadBalancerToSubnets", "DetachLoadBalancerFromSubnets":
		ids := members(f, "Subnets")
		for _, id := range ids {
			sn := s.subnet(id)
			if sn == nil {
				return nil, 0, badRequest("SubnetNotFound", "The subnet %s does not exist", id)
			}
		}
		for _, id := range ids {
			has := slices.Contains(lb.subnets, id)
			if action == "AttachLoadBalancerToSubnets" && !has {
				lb.subnets = append(lb.subnets, id)
			} else if action == "DetachLoadBalancerFromSubnets" && has {
				lb.subnets = slices.DeleteFunc(lb.subnets, func(x string) bool { return x == id })
			}
		}
		lb.zones = s.zonesOf(lb.subnets)
		return s.answer(elbNamespace, action, struct {
			S []string `xml:"Subnets>member"`
		}{lb.subnets}), len(ids), nil
	case "ApplySecurityGroupsToLoadBalancer":
		groups := members(f, "SecurityGroups")
		if aerr := s.checkGroups(groups); aerr != nil {
			return nil, 0, aerr
		}
		lb.groups = groups
		return s.answer(elbNamespace, action, struct {
			G []string `xml:"SecurityGroups>member"`
		}{groups}), len(groups), nil
	default: // AddTags
		tags := queryTags(f, "Tags")
		maps.Copy(lb.tags, tags)
		return s.answer(elbNamespace, action, nil), len(tags), nil
	}
}

func (s *Server) subnet(id string) *Subnet {
	for i := range s.cfg.Subnets {
		if s.cfg.Subnets[i].ID == id {
			return &s.cfg.Subnets[i]
		}
	}
	return nil
}

// zonesOf returns the zones of the subnets, each once, in subnet order.
func (s *Server) zonesOf(subnets []string) []string {
	var zones []string
	for _, id := range subnets {
		if sn := s.subnet(id); sn != nil && !slices.Contains(zones, sn.Zone) {
			zones = append(zones, sn.Zone)
		}
	}
	return zones
}

// checkGroups: every group must exist (s.mu held).
func (s *Server) checkGroups(ids []string) *apiError {
	for _, id := range ids {
		if !slices.ContainsFunc(s.groups, func(g *SecurityGroup) bool { return g.ID == id }) {
			return badRequest("InvalidSecurityGroup", "One or more security groups are invalid: %s", id)
		}
	}
	return nil
}

// queryTags reads prefix.member.N.Key / .Value.
func queryTags(f url.Values, prefix string) map[string]string {
	tags := map[string]string{}
	for i := 1; ; i++ {
		p := prefix + ".member." + strconv.Itoa(i)
		k, ok := f[p+".Key"]
		if !ok {
			return tags
		}
		tags[k[0]] = f.Get(p + ".Value")
	}
}

func tagsXML(tags map[string]string) []keyValueXML {
	out := make([]keyValueXML, 0, len(tags))
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		out = append(out, keyValueXML{Key: k, Value: tags[k]})
	}
	return out
}

func parseELBListeners(f url.Values) ([]elbListener, *apiError) {
	var out []elbListener
	for i := 1; ; i++ {
		p := "Listeners.member." + strconv.Itoa(i)
		proto, ok := f[p+".Protocol"]
		if !ok {
			break
		}
		lbPort, err1 := strconv.Atoi(f.Get(p + ".LoadBalancerPort"))
		inPort, err2 := strconv.Atoi(f.Get(p + ".InstancePort"))
		if err1 != nil || err2 != nil || lbPort < 1 || lbPort > 65535 || inPort < 1 || inPort > 65535 {
			return nil, badRequest("ValidationError", "%s: LoadBalancerPort and InstancePort must be ports (got %q, %q)", p, f.Get(p+".LoadBalancerPort"), f.Get(p+".InstancePort"))
		}
		l := elbListener{Protocol: strings.ToUpper(proto[0]), LoadBalancerPort: lbPort, InstancePort: inPort,
			InstanceProtocol: strings.ToUpper(f.Get(p + ".InstanceProtocol")), SSLCertificateID: f.Get(p + ".SSLCertificateId")}
		if l.InstanceProtocol == "" {
			// The documented default: the front end's protocol for TCP and
			// HTTP, their plain form behind SSL and HTTPS.
			l.InstanceProtocol = map[string]string{"SSL": "TCP", "HTTPS": "HTTP"}[l.Protocol]
			if l.InstanceProtocol == "" {
				l.InstanceProtocol = l.Protocol
			}
		}
		out = append(out, l)
	}
	if len(out) == 0 {
		return nil, badRequest("ValidationError", "Listeners is required")
	}
	return out, nil
}

func sortListeners(ls []elbListener) {
	sort.Slice(ls, func(i, j int) bool { return ls[i].LoadBalancerPort < ls[j].LoadBalancerPort })
}

func parseHealthCheck(f url.Values) (elbHealthCheck, *apiError) {
	hc := elbHealthCheck{Target: f.Get("HealthCheck.Target")}
	for _, x := range []struct {
		key string
		dst *int
	}{{"Interval", &hc.Interval}, {"Timeout", &hc.Timeout}, {"UnhealthyThreshold", &hc.UnhealthyThreshold}, {"HealthyThreshold", &hc.HealthyThreshold}} {
		n, err := strconv.Atoi(f.Get("HealthCheck." + x.key))
		if err != nil || n < 1 {
			return hc, badRequest("ValidationError", "HealthCheck.%s must be a positive integer (got %q)", x.key, f.Get("HealthCheck."+x.key))
		}
		*x.dst = n
	}
	if hc.Target == "" {
		return hc, badRequest("ValidationError", "HealthCheck.Target is required")
	}
	return hc, nil
}

// modifyELBAttributes sets the attributes the request gives, keeping the
// others.
func modifyELBAttributes(a *elbAttributes, f url.Values) *apiError {
	const p = "LoadBalancerAttributes."
	var bad *apiError
	boolean := func(key string, dst *bool) {
		if v, ok := f[p+key]; ok {
			b, err := strconv.ParseBool(v[0])
			if err != nil && bad == nil {
				bad = badRequest("ValidationError", "%s%s: %q is not a boolean", p, key, v[0])
			}
			*dst = b
		}
	}
	integer := func(key string, dst *int) {
		if v, ok := f[p+key]; ok {
			n, err := strconv.Atoi(v[0])
			if err != nil && bad == nil {
				bad = badRequest("ValidationError", "%s%s: %q is not an integer", p, key, v[0])
			}
			*dst = n
		}
	}
	str := func(key string, dst *string) {
		if v, ok := f[p+key]; ok {
			*dst = v[0]
		}
	}
	next := *a
	boolean("AccessLog.Enabled", &next.AccessLog.Enabled)
	integer("AccessLog.EmitInterval", &next.AccessLog.EmitInterval)
	str("AccessLog.S3BucketName", &next.AccessLog.S3BucketName)
	str("AccessLog.S3BucketPrefix", &next.AccessLog.S3BucketPrefix)
	boolean("ConnectionDraining.Enabled", &next.ConnectionDraining.Enabled)
	integer("ConnectionDraining.Timeout", &next.ConnectionDraining.Timeout)
	integer("ConnectionSettings.IdleTimeout", &next.ConnectionSettings.IdleTimeout)
	boolean("CrossZoneLoadBalancing.Enabled", &next.CrossZoneLoadBalancing.Enabled)
	if bad != nil {
		return bad
	}
	if next.AccessLog.Enabled && next.AccessLog.S3BucketName == "" {
		return badRequest("InvalidConfigurationRequest", "The S3BucketName is required when access logs are enabled")
	}
	*a = next
	return nil
}

// createELB answers CreateLoadBalancer: a name taken is
// DuplicateLoadBalancerName (AWS answers the same configuration with
// success; the provider only creates after DescribeLoadBalancers found none).
// Subnets and security groups must exist; the health check and attributes
// start at their documented defaults.
func (s *Server) createELB(f url.Values) (any, int, *apiError) {
	name := f.Get("LoadBalancerName")
	if name == "" || len(name) > 32 {
		return nil, 0, badRequest("ValidationError", "LoadBalancerName must be 1 to 32 characters (got %q)", name)
	}
	if s.elbs[name] != nil {
		return nil, 0, badRequest("DuplicateLoadBalancerName", "Load balancer name '%s' already exists", name)
	}
	ls, aerr := parseELBListeners(f)
	if aerr != nil {
		return nil, 0, aerr
	}
	subnets, groups := members(f, "Subnets"), members(f, "SecurityGroups")
	if len(subnets) == 0 {
		return nil, 0, badRequest("ValidationError", "Subnets is required (EC2-Classic is not simulated)")
	}
	vpc := ""
	for _, id := range subnets {
		sn := s.subnet(id)
		if sn == nil {
			return nil, 0, badRequest("SubnetNotFound", "The subnet %s does not exist", id)
		}
		vpc = sn.VPCID
	}
	if aerr := s.checkGroups(groups); aerr != nil {
		return nil, 0, aerr
	}
	scheme := f.Get("Scheme")
	if scheme == "" {
		scheme = "internet-facing"
	}
	s.elbSeq++
	dns := fmt.Sprintf("%s-%d.%s.elb.amazonaws.com", name, 100000000+s.elbSeq, s.cfg.Region)
	if scheme == "internal" {
		dns = "internal-" + dns
	}
	sortListeners(ls)
	lb := &classicLB{
		name: name, dns: dns, scheme: scheme, vpc: vpc, created: createdTime,
		listeners: ls, subnets: subnets, zones: s.zonesOf(subnets), groups: groups, tags: queryTags(f, "Tags"),
		// AWS's default health check: TCP to the first listener's
		// instance port.
		health: elbHealthCheck{Target: "TCP:" + strconv.Itoa(ls[0].InstancePort), Interval: 30, Timeout: 5, UnhealthyThreshold: 2, HealthyThreshold: 10},
		attrs:  defaultELBAttributes(),
	}
	s.elbs[name] = lb
	return s.answer(elbNamespace, "CreateLoadBalancer", struct {
		DNS string `xml:"DNSName"`
	}{dns}), 1, nil
}

// describeELBs answers DescribeLoadBalancers: the named load balancers (an
// unknown name is LoadBalancerNotFound), or all of them by name; no
// pagination.
func (s *Server) describeELBs(f url.Values) (any, int, *apiError) {
	names := members(f, "LoadBalancerNames")
	if len(names) == 0 {
		names = slices.Sorted(maps.Keys(s.elbs))
	}
	var out []elbDescriptionXML
	for _, n := range names {
		lb := s.elbs[n]
		if lb == nil {
			return nil, 0, elbNotFound(n)
		}
		x := elbDescriptionXML{
			Name: lb.name, DNS: lb.dns, ZoneNameID: "Z35SXDOTRQ7X7K", Scheme: lb.scheme, VPC: lb.vpc,
			Created: lb.created.Format(time.RFC3339), Zones: lb.zones, Subnets: lb.subnets, Groups: lb.groups,
			Health: lb.health, Instances: instanceRefs(lb.instances),
		}
		x.SourceGroup.Owner = ownerID
		for _, g := range s.groups {
			if len(lb.groups) > 0 && g.ID == lb.groups[0] {
				x.SourceGroup.Name = g.Name
			}
		}
		for _, l := range lb.listeners {
			x.Listeners = append(x.Listeners, elbListenerDescriptionXML{Listener: l})
		}
		out = append(out, x)
	}
	return s.answer(elbNamespace, "DescribeLoadBalancers", struct {
		LBs []elbDescriptionXML `xml:"LoadBalancerDescriptions>member"`
	}{out}), len(out), nil
}

type instanceRefXML struct {
	ID string `xml:"InstanceId"`
}

func instanceRefs(ids []string) []instanceRefXML {
	out := make([]instanceRefXML, 0, len(ids))
	for _, id := range ids {
		out = append(out, instanceRefXML{ID: id})
	}
	return out
}

type elbListenerDescriptionXML struct {
	Listener    elbListener `xml:"Listener"`
	PolicyNames []string    `xml:"PolicyNames>member"`
}

type elbDescriptionXML struct {
	Name        string                      `xml:"LoadBalancerName"`
	DNS         string                      `xml:"DNSName"`
	ZoneName    string                      `xml:"CanonicalHostedZoneName,omitempty"`
	ZoneNameID  string                      `xml:"CanonicalHostedZoneNameID"`
	Listeners   []elbListenerDescriptionXML `xml:"ListenerDescriptions>member"`
	Zones       []string                    `xml:"AvailabilityZones>member"`
	Subnets     []string                    `xml:"Subnets>member"`
	VPC         string                      `xml:"VPCId"`
	Instances   []instanceRefXML            `xml:"Instances>member"`
	Health      elbHealthCheck              `xml:"HealthCheck"`
	SourceGroup struct {
		Owner string `xml:"OwnerAlias"`
		Name  string `xml:"GroupName"`
	} `xml:"SourceSecurityGroup"`
	Groups  []string `xml:"SecurityGroups>member"`
	Created string   `xml:"CreatedTime"`
	Scheme  string   `xml:"Scheme"`
}

// LoadBalancer is a snapshot of one simulated load balancer, classic or
// network, for tests and reports.
type LoadBalancer struct {
	Name    string
	ARN     string // network load balancers only
	DNSName string
	Scheme  string
	Subnets []string
	// SecurityGroups are the groups attached to the load balancer.
	SecurityGroups []string
	// Listeners are "PROTO:port->PROTO:port" (classic: to the instance
	// port; network: to the target group's protocol and port), by port.
	Listeners []string
	// Instances are the instances registered with a classic load
	// balancer, or "id:port" targets of a network one's target groups, sorted.
	Instances []string
	// HealthCheck is a classic load balancer's health check target
	// ("TCP:30080"), or each target group's "PROTO:port" health check.
	HealthCheck []string
}

// ClassicLoadBalancers returns the classic load balancers, by name.
func (s *Server) ClassicLoadBalancers() []LoadBalancer {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []LoadBalancer
	for _, n := range slices.Sorted(maps.Keys(s.elbs)) {
		lb := s.elbs[n]
		x := LoadBalancer{Name: lb.name, DNSName: lb.dns, Scheme: lb.scheme, Subnets: slices.Clone(lb.subnets),
			SecurityGroups: slices.Clone(lb.groups), Instances: slices.Clone(lb.instances), HealthCheck: []string{lb.health.Target}}
		for _, l := range lb.listeners {
			x.Listeners = append(x.Listeners, fmt.Sprintf("%s:%d->%s:%d", l.Protocol, l.LoadBalancerPort, l.InstanceProtocol, l.InstancePort))
		}
		out = append(out, x)
	}
	return out
}

// NetworkLoadBalancers returns the network load balancers, by name.
func (s *Server) NetworkLoadBalancers() []LoadBalancer {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []LoadBalancer
	for _, lb := range s.nlbs {
		x := LoadBalancer{Name: lb.name, ARN: lb.arn, DNSName: lb.dns, Scheme: lb.scheme,
			Subnets: slices.Clone(lb.subnets), SecurityGroups: slices.Clone(lb.groups)}
		for _, l := range lb.listeners {
			tg := s.tgs[l.targetGroup]
			x.Listeners = append(x.Listeners, fmt.Sprintf("%s:%d->%s:%d", l.protocol, l.port, tg.protocol, tg.port))
			x.HealthCheck = append(x.HealthCheck, tg.hcProtocol+":"+tg.hcPort)
			for _, t := range tg.targets {
				x.Instances = append(x.Instances, fmt.Sprintf("%s:%d", t.id, t.port))
			}
		}
		sort.Strings(x.Instances)
		out = append(out, x)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// TargetGroupCount is the number of ELBv2 target groups, in use or not.
func (s *Server) TargetGroupCount() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.tgs)
}
