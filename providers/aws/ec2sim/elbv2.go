package ec2sim

import (
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

// networkLB is one network load balancer (ELBv2, Type network).
type networkLB struct {
	arn, id, name, dns, scheme, vpc string
	subnets                         []string // one per zone
	groups                          []string
	attrs                           map[string]string
	tags                            map[string]string
	listeners                       []*listenerV2 // by port
}

type listenerV2 struct {
	arn                 string
	port                int
	protocol, sslPolicy string
	certs               []string
	targetGroup         string // the forward action's target group ARN
}

type targetGroup struct {
	arn, name, protocol, vpc, targetType string
	port                                 int
	hcProtocol, hcPort, hcPath           string
	hcInterval, hcTimeout                int
	healthy, unhealthy                   int
	targets                              []target // sorted
	tags                                 map[string]string
}

type target struct {
	id   string
	port int
}

// defaultNLBAttributes are a new network load balancer's attributes.
func defaultNLBAttributes() map[string]string {
	return map[string]string{
		"access_logs.s3.enabled": "false", "access_logs.s3.bucket": "", "access_logs.s3.prefix": "",
		"deletion_protection.enabled": "false", "load_balancing.cross_zone.enabled": "false",
	}
}

func lbNotFound() *apiError {
	return badRequest("LoadBalancerNotFound", "One or more load balancers not found")
}

func tgNotFound() *apiError {
	return badRequest("TargetGroupNotFound", "One or more target groups not found")
}

// serveELBv2 answers one ELBv2 action for network load balancers; any
// other is InvalidAction.
func (s *Server) serveELBv2(action string, r *http.Request) (any, int, *apiError) {
	f := r.Form
	s.mu.Lock()
	defer s.mu.Unlock()
	switch action {
	case "DescribeLoadBalancers":
		return s.describeNLBs(f)
	case "CreateLoadBalancer":
		return s.createNLB(f)
	case "DeleteLoadBalancer":
		// Deleting a load balancer that does not exist succeeds, as AWS
		// documents; its listeners go with it.
		arn := f.Get("LoadBalancerArn")
		if arn == "" {
			return nil, 0, badRequest("ValidationError", "LoadBalancerArn is required")
		}
		n := len(s.nlbs)
		delete(s.nlbs, arn)
		return s.answer(elbv2Namespace, action, nil), n - len(s.nlbs), nil
	case "DescribeLoadBalancerAttributes", "ModifyLoadBalancerAttributes":
		lb := s.nlbs[f.Get("LoadBalancerArn")]
		if lb == nil {
			return nil, 0, lbNotFound()
		}
		if action == "ModifyLoadBalancerAttributes" {
			next := maps.Clone(lb.attrs)
			for i := 1; ; i++ {
				p := "Attributes.member." + strconv.Itoa(i)
				k, ok := f[p+".Key"]
				if !ok {
					break
				}
				if _, known := lb.attrs[k[0]]; !known {
					return nil, 0, badRequest("ValidationError", "Load balancer attribute key '%s' is not recognized", k[0])
				}
				next[k[0]] = f.Get(p + ".Value")
			}
			lb.attrs = next
		}
		return s.answer(elbv2Namespace, action, struct {
			A []keyValueXML `xml:"Attributes>member"`
		}{tagsXML(lb.attrs)}), len(lb.attrs), nil
	case "SetSecurityGroups":
		lb := s.nlbs[f.Get("LoadBalancerArn")]
		if lb == nil {
			return nil, 0, lbNotFound()
		}
		groups := members(f, "SecurityGroups")
		if aerr := s.checkGroups(groups); aerr != nil {
			return nil, 0, aerr
		}
		lb.groups = groups
		return s.answer(elbv2Namespace, action, struct {
			G []string `xml:"SecurityGroupIds>member"`
		}{groups}), len(groups), nil
	case "CreateTargetGroup":
		return s.createTargetGroup(f)
	case "DescribeTargetGroups":
		return s.describeTargetGroups(f)
	case "ModifyTargetGroup":
		tg := s.tgs[f.Get("TargetGroupArn")]
		if tg == nil {
			return nil, 0, tgNotFound()
		}
		next := *tg
		if aerr := healthCheckV2(f, &next); aerr != nil {
			return nil, 0, aerr
		}
		*tg = next
		return s.answer(elbv2Namespace, action, struct {
			T []targetGroupXML `xml:"TargetGroups>member"`
		}{[]targetGroupXML{s.targetGroupXML(tg)}}), 1, nil
	case "DeleteTargetGroup":
		tg := s.tgs[f.Get("TargetGroupArn")]
		if tg == nil {
			return nil, 0, tgNotFound()
		}
		if lbs := s.lbsOf(tg.arn); len(lbs) > 0 {
			return nil, 0, badRequest("ResourceInUse", "Target group '%s' is currently in use by a listener or a rule", tg.arn)
		}
		delete(s.tgs, tg.arn)
		return s.answer(elbv2Namespace, action, nil), 1, nil
	case "RegisterTargets", "DeregisterTargets":
		tg := s.tgs[f.Get("TargetGroupArn")]
		if tg == nil {
			return nil, 0, tgNotFound()
		}
		var ts []target
		for i := 1; ; i++ {
			p := "Targets.member." + strconv.Itoa(i)
			id, ok := f[p+".Id"]
			if !ok {
				break
			}
			t := target{id: id[0], port: tg.port}
			if v := f.Get(p + ".Port"); v != "" {
				n, err := strconv.Atoi(v)
				if err != nil {
					return nil, 0, badRequest("ValidationError", "%s.Port: %q is not a port", p, v)
				}
				t.port = n
			}
			if s.instances[t.id] == nil {
				return nil, 0, badRequest("InvalidTarget", "The following targets are not valid instances: '%s'", t.id)
			}
			ts = append(ts, t)
		}
		if len(ts) == 0 {
			return nil, 0, badRequest("ValidationError", "Targets is required")
		}
		for _, t := range ts {
			has := slices.Contains(tg.targets, t)
			if action == "RegisterTargets" && !has {
				tg.targets = append(tg.targets, t)
			} else if action == "DeregisterTargets" && has {
				// Deregistration is immediate: the deregistration delay
				// (draining) is not simulated.
				tg.targets = slices.DeleteFunc(tg.targets, func(x target) bool { return x == t })
			}
		}
		sort.Slice(tg.targets, func(i, j int) bool {
			a, b := tg.targets[i], tg.targets[j]
			return a.id < b.id || a.id == b.id && a.port < b.port
		})
		return s.answer(elbv2Namespace, action, nil), len(ts), nil
	case "DescribeTargetHealth":
		tg := s.tgs[f.Get("TargetGroupArn")]
		if tg == nil {
			return nil, 0, tgNotFound()
		}
		var out []targetHealthXML
		for _, t := range tg.targets {
			x := targetHealthXML{HealthCheckPort: tg.hcPort}
			x.Target.ID, x.Target.Port = t.id, t.port
			if x.HealthCheckPort == "traffic-port" {
				x.HealthCheckPort = strconv.Itoa(t.port)
			}
			// Health checks are not simulated: every target is healthy.
			x.Health.State = "healthy"
			out = append(out, x)
		}
		return s.answer(elbv2Namespace, action, struct {
			T []targetHealthXML `xml:"TargetHealthDescriptions>member"`
		}{out}), len(out), nil
	case "CreateListener", "ModifyListener":
		return s.putListener(action, f)
	case "DescribeListeners":
		lb := s.nlbs[f.Get("LoadBalancerArn")]
		if lb == nil {
			return nil, 0, lbNotFound()
		}
		out := make([]listenerXML, 0, len(lb.listeners))
		for _, l := range lb.listeners {
			out = append(out, listenerToXML(lb, l))
		}
		return s.answer(elbv2Namespace, action, struct {
			L []listenerXML `xml:"Listeners>member"`
		}{out}), len(out), nil
	case "DeleteListener":
		arn := f.Get("ListenerArn")
		for _, lb := range s.nlbs {
			if i := slices.IndexFunc(lb.listeners, func(l *listenerV2) bool { return l.arn == arn }); i >= 0 {
				lb.listeners = slices.Delete(lb.listeners, i, i+1)
				return s.answer(elbv2Namespace, action, nil), 1, nil
			}
		}
		return nil, 0, badRequest("ListenerNotFound", "One or more listeners not found")
	}
	return nil, 0, badRequest("InvalidAction", "The action %s is not valid for this web service.", action)
}

// lbsOf returns the ARNs of the load balancers whose listeners forward to
// the target group, sorted.
func (s *Server) lbsOf(tgARN string) []string {
	var out []string
	for _, lb := range s.nlbs {
		if slices.ContainsFunc(lb.listeners, func(l *listenerV2) bool { return l.targetGroup == tgARN }) {
			out = append(out, lb.arn)
		}
	}
	sort.Strings(out)
	return out
}

// createNLB answers CreateLoadBalancer for Type network: one subnet per
// zone (SubnetMappings or Subnets), all of one VPC; a name taken is
// DuplicateLoadBalancerName.
func (s *Server) createNLB(f url.Values) (any, int, *apiError) {
	name := f.Get("Name")
	if name == "" || len(name) > 32 {
		return nil, 0, badRequest("ValidationError", "Name must be 1 to 32 characters (got %q)", name)
	}
	if typ := f.Get("Type"); typ != "network" {
		return nil, 0, badRequest("ValidationError", "Type %q is not simulated (only network load balancers are)", typ)
	}
	for _, lb := range s.nlbs {
		if lb.name == name {
			return nil, 0, badRequest("DuplicateLoadBalancerName", "A load balancer with the same name '%s' exists, but with different settings", name)
		}
	}
	subnets := members(f, "Subnets")
	for i := 1; ; i++ {
		id, ok := f["SubnetMappings.member."+strconv.Itoa(i)+".SubnetId"]
		if !ok {
			break
		}
		subnets = append(subnets, id[0])
	}
	if len(subnets) == 0 {
		return nil, 0, badRequest("ValidationError", "SubnetMappings or Subnets is required")
	}
	vpc := ""
	zones := map[string]bool{}
	for _, id := range subnets {
		sn := s.subnet(id)
		if sn == nil {
			return nil, 0, badRequest("SubnetNotFound", "The subnet ID '%s' is not valid", id)
		}
		if vpc != "" && sn.VPCID != vpc {
			return nil, 0, badRequest("InvalidConfigurationRequest", "The subnets must all be in the same VPC")
		}
		if zones[sn.Zone] {
			return nil, 0, badRequest("InvalidConfigurationRequest", "A load balancer cannot be attached to multiple subnets in the same Availability Zone")
		}
		vpc, zones[sn.Zone] = sn.VPCID, true
	}
	groups := members(f, "SecurityGroups")
	if aerr := s.checkGroups(groups); aerr != nil {
		return nil, 0, aerr
	}
	scheme := f.Get("Scheme")
	if scheme == "" {
		scheme = "internet-facing"
	}
	s.elbSeq++
	id := fmt.Sprintf("%016x", s.elbSeq)
	lb := &networkLB{
		arn: fmt.Sprintf("arn:aws:elasticloadbalancing:%s:%s:loadbalancer/net/%s/%s", s.cfg.Region, ownerID, name, id),
		id:  id, name: name, scheme: scheme, vpc: vpc, subnets: subnets, groups: groups,
		dns:   fmt.Sprintf("%s-%s.elb.%s.amazonaws.com", name, id, s.cfg.Region),
		attrs: defaultNLBAttributes(), tags: queryTags(f, "Tags"),
	}
	if scheme == "internal" {
		lb.dns = "internal-" + lb.dns
	}
	s.nlbs[lb.arn] = lb
	return s.answer(elbv2Namespace, "CreateLoadBalancer", struct {
		L []nlbXML `xml:"LoadBalancers>member"`
	}{[]nlbXML{s.nlbToXML(lb)}}), 1, nil
}

// describeNLBs answers DescribeLoadBalancers by Names or LoadBalancerArns
// (an unknown one is LoadBalancerNotFound), or all, by name; no pagination.
func (s *Server) describeNLBs(f url.Values) (any, int, *apiError) {
	names, arns := members(f, "Names"), members(f, "LoadBalancerArns")
	var lbs []*networkLB
	for _, n := range names {
		var found *networkLB
		for _, lb := range s.nlbs {
			if lb.name == n {
				found = lb
			}
		}
		if found == nil {
			return nil, 0, lbNotFound()
		}
		lbs = append(lbs, found)
	}
	for _, a := range arns {
		lb := s.nlbs[a]
		if lb == nil {
			return nil, 0, lbNotFound()
		}
		lbs = append(lbs, lb)
	}
	if len(names) == 0 && len(arns) == 0 {
		lbs = slices.Collect(maps.Values(s.nlbs))
		sort.Slice(lbs, func(i, j int) bool { return lbs[i].name < lbs[j].name })
	}
	out := make([]nlbXML, 0, len(lbs))
	for _, lb := range lbs {
		out = append(out, s.nlbToXML(lb))
	}
	return s.answer(elbv2Namespace, "DescribeLoadBalancers", struct {
		L []nlbXML `xml:"LoadBalancers>member"`
	}{out}), len(out), nil
}

func (s *Server) nlbToXML(lb *networkLB) nlbXML {
	x := nlbXML{ARN: lb.arn, DNS: lb.dns, ZoneID: "Z26RNL4JYFTOTI", Created: createdTime.Format(time.RFC3339),
		Name: lb.name, Scheme: lb.scheme, VPC: lb.vpc, Type: "network", IPType: "ipv4", Groups: lb.groups}
	x.State.Code = "active"
	for _, id := range lb.subnets {
		x.Zones = append(x.Zones, nlbZoneXML{Zone: s.subnet(id).Zone, Subnet: id})
	}
	return x
}

// healthCheckV2 sets the health check fields the request gives.
func healthCheckV2(f url.Values, tg *targetGroup) *apiError {
	for _, x := range []struct {
		key string
		dst *int
	}{{"HealthCheckIntervalSeconds", &tg.hcInterval}, {"HealthCheckTimeoutSeconds", &tg.hcTimeout},
		{"HealthyThresholdCount", &tg.healthy}, {"UnhealthyThresholdCount", &tg.unhealthy}} {
		if v, ok := f[x.key]; ok {
			n, err := strconv.Atoi(v[0])
			if err != nil || n < 1 {
				return badRequest("ValidationError", "%s must be a positive integer (got %q)", x.key, v[0])
			}
			*x.dst = n
		}
	}
	if v, ok := f["HealthCheckProtocol"]; ok {
		tg.hcProtocol = strings.ToUpper(v[0])
	}
	if v, ok := f["HealthCheckPort"]; ok {
		tg.hcPort = v[0]
	}
	if v, ok := f["HealthCheckPath"]; ok {
		tg.hcPath = v[0]
	}
	return nil
}

// createTargetGroup answers CreateTargetGroup. As AWS documents, creating
// a group with the name and settings of an existing one returns that one;
// the same name with other settings is DuplicateTargetGroupName.
func (s *Server) createTargetGroup(f url.Values) (any, int, *apiError) {
	name, proto, vpc := f.Get("Name"), strings.ToUpper(f.Get("Protocol")), f.Get("VpcId")
	port, err := strconv.Atoi(f.Get("Port"))
	if name == "" || len(name) > 32 || proto == "" || err != nil || port < 1 || port > 65535 {
		return nil, 0, badRequest("ValidationError", "Name (1 to 32 characters), Protocol and Port are required (got %q, %q, %q)", name, proto, f.Get("Port"))
	}
	targetType := f.Get("TargetType")
	if targetType == "" {
		targetType = "instance"
	}
	if targetType != "instance" {
		return nil, 0, badRequest("ValidationError", "TargetType %q is not simulated (only instance is)", targetType)
	}
	tg := &targetGroup{name: name, protocol: proto, vpc: vpc, port: port, targetType: targetType,
		// The documented defaults for a TCP group of a network load balancer.
		hcProtocol: "TCP", hcPort: "traffic-port", hcInterval: 30, hcTimeout: 10, healthy: 5, unhealthy: 2, tags: queryTags(f, "Tags")}
	if aerr := healthCheckV2(f, tg); aerr != nil {
		return nil, 0, aerr
	}
	for _, old := range s.tgs {
		if old.name != name {
			continue
		}
		if old.protocol == tg.protocol && old.port == tg.port && old.vpc == tg.vpc {
			return s.answer(elbv2Namespace, "CreateTargetGroup", struct {
				T []targetGroupXML `xml:"TargetGroups>member"`
			}{[]targetGroupXML{s.targetGroupXML(old)}}), 1, nil
		}
		return nil, 0, badRequest("DuplicateTargetGroupName", "A target group with the same name '%s' exists, but with different settings", name)
	}
	s.elbSeq++
	tg.arn = fmt.Sprintf("arn:aws:elasticloadbalancing:%s:%s:targetgroup/%s/%016x", s.cfg.Region, ownerID, name, s.elbSeq)
	s.tgs[tg.arn] = tg
	return s.answer(elbv2Namespace, "CreateTargetGroup", struct {
		T []targetGroupXML `xml:"TargetGroups>member"`
	}{[]targetGroupXML{s.targetGroupXML(tg)}}), 1, nil
}

// describeTargetGroups answers DescribeTargetGroups by LoadBalancerArn (the
// groups its listeners forward to), TargetGroupArns or Names, or all; an
// unknown load balancer is LoadBalancerNotFound, an unknown group
// TargetGroupNotFound; no pagination.
func (s *Server) describeTargetGroups(f url.Values) (any, int, *apiError) {
	var tgs []*targetGroup
	switch lbARN, arns, names := f.Get("LoadBalancerArn"), members(f, "TargetGroupArns"), members(f, "Names"); {
	case lbARN != "":
		lb := s.nlbs[lbARN]
		if lb == nil {
			return nil, 0, lbNotFound()
		}
		for _, l := range lb.listeners {
			if tg := s.tgs[l.targetGroup]; tg != nil && !slices.Contains(tgs, tg) {
				tgs = append(tgs, tg)
			}
		}
	case len(arns) > 0:
		for _, a := range arns {
			tg := s.tgs[a]
			if tg == nil {
				return nil, 0, tgNotFound()
			}
			tgs = append(tgs, tg)
		}
	case len(names) > 0:
		for _, n := range names {
			found := false
			for _, tg := range s.tgs {
				if tg.name == n {
					tgs, found = append(tgs, tg), true
				}
			}
			if !found {
				return nil, 0, tgNotFound()
			}
		}
	default:
		tgs = slices.Collect(maps.Values(s.tgs))
	}
	sort.Slice(tgs, func(i, j int) bool { return tgs[i].arn < tgs[j].arn })
	out := make([]targetGroupXML, 0, len(tgs))
	for _, tg := range tgs {
		out = append(out, s.targetGroupXML(tg))
	}
	return s.answer(elbv2Namespace, "DescribeTargetGroups", struct {
		T []targetGroupXML `xml:"TargetGroups>member"`
	}{out}), len(out), nil
}

func (s *Server) targetGroupXML(tg *targetGroup) targetGroupXML {
	return targetGroupXML{ARN: tg.arn, Name: tg.name, Protocol: tg.protocol, Port: tg.port, VPC: tg.vpc,
		HCProtocol: tg.hcProtocol, HCPort: tg.hcPort, HCEnabled: true, HCInterval: tg.hcInterval, HCTimeout: tg.hcTimeout,
		Healthy: tg.healthy, Unhealthy: tg.unhealthy, HCPath: tg.hcPath, LBs: s.lbsOf(tg.arn), TargetType: tg.targetType, IPType: "ipv4"}
}

// putListener answers CreateListener (a port taken is DuplicateListener)
// and ModifyListener (the fields given replace the listener's): one forward
// action to a target group of the load balancer's VPC.
func (s *Server) putListener(action string, f url.Values) (any, int, *apiError) {
	var (
		lb *networkLB
		l  *listenerV2
	)
	if action == "CreateListener" {
		lb = s.nlbs[f.Get("LoadBalancerArn")]
		if lb == nil {
			return nil, 0, lbNotFound()
		}
		l = &listenerV2{}
	} else {
		arn := f.Get("ListenerArn")
		for _, x := range s.nlbs {
			for _, y := range x.listeners {
				if y.arn == arn {
					lb, l = x, y
				}
			}
		}
		if l == nil {
			return nil, 0, badRequest("ListenerNotFound", "One or more listeners not found")
		}
	}
	next := *l
	if v := f.Get("Port"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 65535 {
			return nil, 0, badRequest("ValidationError", "Port: %q is not a port", v)
		}
		next.port = n
	}
	if v := f.Get("Protocol"); v != "" {
		next.protocol = strings.ToUpper(v)
	}
	if v, ok := f["SslPolicy"]; ok {
		next.sslPolicy = v[0]
	}
	if _, ok := f["Certificates.member.1.CertificateArn"]; ok {
		next.certs = nil
		for i := 1; ; i++ {
			c, ok := f["Certificates.member."+strconv.Itoa(i)+".CertificateArn"]
			if !ok {
				break
			}
			next.certs = append(next.certs, c[0])
		}
	}
	if typ, ok := f["DefaultActions.member.1.Type"]; ok {
		if typ[0] != "forward" || f.Get("DefaultActions.member.2.Type") != "" {
			return nil, 0, badRequest("ValidationError", "only one forward default action is simulated")
		}
		tg := s.tgs[f.Get("DefaultActions.member.1.TargetGroupArn")]
		if tg == nil {
			return nil, 0, tgNotFound()
		}
		if tg.vpc != lb.vpc {
			return nil, 0, badRequest("InvalidConfigurationRequest", "The target group's VPC %s is not the load balancer's %s", tg.vpc, lb.vpc)
		}
		next.targetGroup = tg.arn
	}
	if next.port == 0 || next.protocol == "" || next.targetGroup == "" {
		return nil, 0, badRequest("ValidationError", "Port, Protocol and a forward DefaultActions entry are required")
	}
	if slices.ContainsFunc(lb.listeners, func(x *listenerV2) bool { return x != l && x.port == next.port }) {
		return nil, 0, badRequest("DuplicateListener", "A listener already exists on this port for this load balancer")
	}
	if action == "CreateListener" {
		s.elbSeq++
		next.arn = fmt.Sprintf("arn:aws:elasticloadbalancing:%s:%s:listener/net/%s/%s/%016x", s.cfg.Region, ownerID, lb.name, lb.id, s.elbSeq)
		lb.listeners = append(lb.listeners, &next)
		l = &next
	} else {
		*l = next
	}
	sort.Slice(lb.listeners, func(i, j int) bool { return lb.listeners[i].port < lb.listeners[j].port })
	return s.answer(elbv2Namespace, action, struct {
		L []listenerXML `xml:"Listeners>member"`
	}{[]listenerXML{listenerToXML(lb, l)}}), 1, nil
}

func listenerToXML(lb *networkLB, l *listenerV2) listenerXML {
	x := listenerXML{ARN: l.arn, LB: lb.arn, Port: l.port, Protocol: l.protocol, SSLPolicy: l.sslPolicy}
	for _, c := range l.certs {
		x.Certificates = append(x.Certificates, certificateXML{ARN: c})
	}
	x.Actions = []actionXML{{Type: "forward", TargetGroup: l.targetGroup}}
	return x
}

type nlbXML struct {
	ARN     string `xml:"LoadBalancerArn"`
	DNS     string `xml:"DNSName"`
	ZoneID  string `xml:"CanonicalHostedZoneId"`
	Created string `xml:"CreatedTime"`
	Name    string `xml:"LoadBalancerName"`
	Scheme  string `xml:"Scheme"`
	VPC     string `xml:"VpcId"`
	State   struct {
		Code string `xml:"Code"`
	} `xml:"State"`
	Type   string       `xml:"Type"`
	Zones  []nlbZoneXML `xml:"AvailabilityZones>member"`
	Groups []string     `xml:"SecurityGroups>member"`
	IPType string       `xml:"IpAddressType"`
}

type nlbZoneXML struct {
	Zone   string `xml:"ZoneName"`
	Subnet string `xml:"SubnetId"`
}

type targetGroupXML struct {
	ARN        string   `xml:"TargetGroupArn"`
	Name       string   `xml:"TargetGroupName"`
	Protocol   string   `xml:"Protocol"`
	Port       int      `xml:"Port"`
	VPC        string   `xml:"VpcId"`
	HCProtocol string   `xml:"HealthCheckProtocol"`
	HCPort     string   `xml:"HealthCheckPort"`
	HCEnabled  bool     `xml:"HealthCheckEnabled"`
	HCInterval int      `xml:"HealthCheckIntervalSeconds"`
	HCTimeout  int      `xml:"HealthCheckTimeoutSeconds"`
	Healthy    int      `xml:"HealthyThresholdCount"`
	Unhealthy  int      `xml:"UnhealthyThresholdCount"`
	HCPath     string   `xml:"HealthCheckPath,omitempty"`
	LBs        []string `xml:"LoadBalancerArns>member"`
	TargetType string   `xml:"TargetType"`
	IPType     string   `xml:"IpAddressType"`
}

type targetHealthXML struct {
	Target struct {
		ID   string `xml:"Id"`
		Port int    `xml:"Port"`
	} `xml:"Target"`
	HealthCheckPort string `xml:"HealthCheckPort"`
	Health          struct {
		State string `xml:"State"`
	} `xml:"TargetHealth"`
}

type listenerXML struct {
	ARN          string           `xml:"ListenerArn"`
	LB           string           `xml:"LoadBalancerArn"`
	Port         int              `xml:"Port"`
	Protocol     string           `xml:"Protocol"`
	Certificates []certificateXML `xml:"Certificates>member"`
	SSLPolicy    string           `xml:"SslPolicy,omitempty"`
	Actions      []actionXML      `xml:"DefaultActions>member"`
}

type certificateXML struct {
	ARN string `xml:"CertificateArn"`
}

type actionXML struct {
	Type        string `xml:"Type"`
	TargetGroup string `xml:"TargetGroupArn"`
}
