package ec2sim

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// SecurityGroup is one security group of the simulated Region: the
// Config.SecurityGroups it starts with, and those CreateSecurityGroup adds
// (the AWS provider creates one per classic load balancer), with the ingress
// rules AuthorizeSecurityGroupIngress adds (egress rules are not simulated).
type SecurityGroup struct {
	ID          string // sg-0123456789abcdef0
	Name        string
	Description string
	VPCID       string
	Tags        map[string]string
}

func knownGroupFilter(name string) bool {
	switch name {
	case "group-id", "group-name", "vpc-id", "tag-key", "ip-permission.group-id":
		return true
	}
	return strings.HasPrefix(name, "tag:")
}

// groupMatches reports whether a group passes every filter; rules are the
// group's ingress rules (ip-permission.group-id: a group one of them
// admits).
func groupMatches(g *SecurityGroup, rules []rule, fs []filter) bool {
	for _, f := range fs {
		var got []string
		switch {
		case f.name == "ip-permission.group-id":
			for _, ru := range rules {
				if ru.groupID != "" {
					got = append(got, ru.groupID)
				}
			}
		case f.name == "group-id":
			got = []string{g.ID}
		case f.name == "group-name":
			got = []string{g.Name}
		case f.name == "vpc-id":
			got = []string{g.VPCID}
		case f.name == "tag-key":
			for k := range g.Tags {
				got = append(got, k)
			}
		case strings.HasPrefix(f.name, "tag:"):
			if v, ok := g.Tags[strings.TrimPrefix(f.name, "tag:")]; ok {
				got = []string{v}
			}
		}
		if !anyMatch(got, f.values) {
			return false
		}
	}
	return true
}

// describeSecurityGroups answers DescribeSecurityGroups: the groups named by
// GroupId.N (an unknown one is InvalidGroup.NotFound) or GroupName.N,
// passing every filter, in creation order; no pagination.
func (s *Server) describeSecurityGroups(r *http.Request) (any, int, *apiError) {
	fs, aerr := filtersWith(r.Form, knownGroupFilter)
	if aerr != nil {
		return nil, 0, aerr
	}
	ids, names := list(r.Form, "GroupId"), list(r.Form, "GroupName")
	s.mu.RLock()
	defer s.mu.RUnlock()
	wantID, wantName := map[string]bool{}, map[string]bool{}
	for _, id := range ids {
		found := false
		for _, g := range s.groups {
			found = found || g.ID == id
		}
		if !found {
			return nil, 0, badRequest("InvalidGroup.NotFound", "The security group '%s' does not exist", id)
		}
		wantID[id] = true
	}
	for _, n := range names {
		wantName[n] = true
	}
	resp := describeGroupsResponse{XMLNS: Namespace, RequestID: s.requestID()}
	for _, g := range s.groups {
		if len(wantID) > 0 && !wantID[g.ID] || len(wantName) > 0 && !wantName[g.Name] || !groupMatches(g, s.ingress[g.ID], fs) {
			continue
		}
		x := groupXML{OwnerID: ownerID, ID: g.ID, Name: g.Name, Description: g.Description, VPCID: g.VPCID, Permissions: permissionsXML(s.ingress[g.ID])}
		keys := make([]string, 0, len(g.Tags))
		for k := range g.Tags {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			x.Tags = append(x.Tags, tagXML{Key: k, Value: g.Tags[k]})
		}
		resp.Groups = append(resp.Groups, x)
	}
	return resp, len(resp.Groups), nil
}

// createSecurityGroup answers CreateSecurityGroup: GroupName,
// GroupDescription and VpcId, tags from its security-group
// TagSpecification; a name taken in the VPC is InvalidGroup.Duplicate.
func (s *Server) createSecurityGroup(r *http.Request) (any, int, *apiError) {
	name, desc, vpc := r.Form.Get("GroupName"), r.Form.Get("GroupDescription"), r.Form.Get("VpcId")
	if name == "" || desc == "" {
		return nil, 0, badRequest("MissingParameter", "The request must contain the parameters GroupName and GroupDescription")
	}
	tags := map[string]string{}
	for i := 1; ; i++ {
		p := "TagSpecification." + strconv.Itoa(i)
		typ, ok := r.Form[p+".ResourceType"]
		if !ok {
			break
		}
		if typ[0] != "security-group" {
			return nil, 0, badRequest("InvalidParameterValue", "'%s' is not a valid taggable resource type for this operation.", typ[0])
		}
		for j := 1; ; j++ {
			k, ok := r.Form[p+".Tag."+strconv.Itoa(j)+".Key"]
			if !ok {
				break
			}
			tags[k[0]] = r.Form.Get(p + ".Tag." + strconv.Itoa(j) + ".Value")
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.groups {
		if g.Name == name && g.VPCID == vpc {
			return nil, 0, badRequest("InvalidGroup.Duplicate", "The security group '%s' already exists for VPC '%s'", name, vpc)
		}
	}
	s.groupSeq++
	g := &SecurityGroup{ID: fmt.Sprintf("sg-%017x", s.groupSeq), Name: name, Description: desc, VPCID: vpc, Tags: tags}
	s.groups = append(s.groups, g)
	return createGroupResponse{XMLNS: Namespace, RequestID: s.requestID(), Return: true, GroupID: g.ID}, 1, nil
}

// ownerID is the simulated account.
const ownerID = "123456789012"

type describeGroupsResponse struct {
	XMLName   xml.Name   `xml:"DescribeSecurityGroupsResponse"`
	XMLNS     string     `xml:"xmlns,attr"`
	RequestID string     `xml:"requestId"`
	Groups    []groupXML `xml:"securityGroupInfo>item"`
}

type groupXML struct {
	OwnerID     string          `xml:"ownerId"`
	ID          string          `xml:"groupId"`
	Name        string          `xml:"groupName"`
	Description string          `xml:"groupDescription"`
	VPCID       string          `xml:"vpcId,omitempty"`
	Permissions []permissionXML `xml:"ipPermissions>item"`
	Tags        []tagXML        `xml:"tagSet>item"`
}

type createGroupResponse struct {
	XMLName   xml.Name `xml:"CreateSecurityGroupResponse"`
	XMLNS     string   `xml:"xmlns,attr"`
	RequestID string   `xml:"requestId"`
	Return    bool     `xml:"return"`
	GroupID   string   `xml:"groupId"`
}

// rule is one ingress permission of a group, one source each: a CIDR or
// another group.
type rule struct {
	protocol         string
	fromPort, toPort int
	cidr, groupID    string
	// description is an attribute of the rule, not part of its identity:
	// EC2 matches rules by protocol, ports and source.
	description string
}

func (ru rule) key() rule {
	ru.description = ""
	return ru
}

func sameRule(a rule) func(rule) bool {
	return func(b rule) bool { return a.key() == b.key() }
}

// ingressRules parses IpPermissions.N (IpProtocol, FromPort, ToPort,
// IpRanges.M.CidrIp, Groups.M.GroupId) into rules.
func ingressRules(r *http.Request) ([]rule, *apiError) {
	var out []rule
	for i := 1; ; i++ {
		p := "IpPermissions." + strconv.Itoa(i)
		proto, ok := r.Form[p+".IpProtocol"]
		if !ok {
			break
		}
		port := func(key string) (int, *apiError) {
			v := r.Form.Get(p + "." + key)
			if v == "" {
				return -1, nil
			}
			n, err := strconv.Atoi(v)
			if err != nil {
				return 0, badRequest("InvalidParameterValue", "Invalid value '%s' for %s.%s", v, p, key)
			}
			return n, nil
		}
		from, aerr := port("FromPort")
		if aerr != nil {
			return nil, aerr
		}
		to, aerr := port("ToPort")
		if aerr != nil {
			return nil, aerr
		}
		base := rule{protocol: proto[0], fromPort: from, toPort: to}
		n := 0
		for j := 1; ; j++ {
			c, ok := r.Form[p+".IpRanges."+strconv.Itoa(j)+".CidrIp"]
			if !ok {
				break
			}
			x := base
			x.cidr = c[0]
			x.description = r.Form.Get(p + ".IpRanges." + strconv.Itoa(j) + ".Description")
			out = append(out, x)
			n++
		}
		for j := 1; ; j++ {
			g, ok := r.Form[p+".Groups."+strconv.Itoa(j)+".GroupId"]
			if !ok {
				break
			}
			x := base
			x.groupID = g[0]
			x.description = r.Form.Get(p + ".Groups." + strconv.Itoa(j) + ".Description")
			out = append(out, x)
			n++
		}
		if n == 0 {
			return nil, badRequest("InvalidParameterValue", "%s names no source (IpRanges or Groups)", p)
		}
	}
	if len(out) == 0 {
		return nil, badRequest("MissingParameter", "The request must contain the parameter IpPermissions")
	}
	return out, nil
}

// authorizeIngress answers AuthorizeSecurityGroupIngress: GroupId's group
// gets the rules; a rule it already has is InvalidPermission.Duplicate (and
// adds none of them), an unknown group InvalidGroup.NotFound.
func (s *Server) authorizeIngress(r *http.Request) (any, int, *apiError) {
	id := r.Form.Get("GroupId")
	rules, aerr := ingressRules(r)
	if aerr != nil {
		return nil, 0, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var g *SecurityGroup
	for _, x := range s.groups {
		if x.ID == id {
			g = x
		}
	}
	if g == nil {
		return nil, 0, badRequest("InvalidGroup.NotFound", "The security group '%s' does not exist", id)
	}
	for _, ru := range rules {
		if slices.ContainsFunc(s.ingress[id], sameRule(ru)) {
			return nil, 0, badRequest("InvalidPermission.Duplicate", "the specified rule \"peer: %s%s, %s, from port: %d, to port: %d, ALLOW\" already exists", ru.cidr, ru.groupID, ru.protocol, ru.fromPort, ru.toPort)
		}
	}
	if s.ingress == nil {
		s.ingress = map[string][]rule{}
	}
	s.ingress[id] = append(s.ingress[id], rules...)
	return returnResponse{XMLName: xml.Name{Local: "AuthorizeSecurityGroupIngressResponse"}, XMLNS: Namespace, RequestID: s.requestID(), Return: true}, len(rules), nil
}

// permissionsXML groups a group's rules by protocol and ports, in the
// order they were added.
func permissionsXML(rules []rule) []permissionXML {
	var out []permissionXML
	for _, ru := range rules {
		i := slices.IndexFunc(out, func(p permissionXML) bool {
			return p.Protocol == ru.protocol && p.from == ru.fromPort && p.to == ru.toPort
		})
		if i < 0 {
			p := permissionXML{Protocol: ru.protocol, from: ru.fromPort, to: ru.toPort}
			if ru.fromPort >= 0 {
				p.FromPort = &ru.fromPort
			}
			if ru.toPort >= 0 {
				p.ToPort = &ru.toPort
			}
			out = append(out, p)
			i = len(out) - 1
		}
		if ru.cidr != "" {
			out[i].Ranges = append(out[i].Ranges, ipRangeXML{CIDR: ru.cidr, Description: ru.description})
		} else {
			out[i].Groups = append(out[i].Groups, groupPairXML{GroupID: ru.groupID, UserID: ownerID, Description: ru.description})
		}
	}
	return out
}

type permissionXML struct {
	Protocol string         `xml:"ipProtocol"`
	FromPort *int           `xml:"fromPort,omitempty"`
	ToPort   *int           `xml:"toPort,omitempty"`
	Ranges   []ipRangeXML   `xml:"ipRanges>item"`
	Groups   []groupPairXML `xml:"groups>item"`
	from, to int
}

type ipRangeXML struct {
	CIDR        string `xml:"cidrIp"`
	Description string `xml:"description,omitempty"`
}

type groupPairXML struct {
	UserID      string `xml:"userId"`
	GroupID     string `xml:"groupId"`
	Description string `xml:"description,omitempty"`
}

type returnResponse struct {
	XMLName   xml.Name
	XMLNS     string `xml:"xmlns,attr"`
	RequestID string `xml:"requestId"`
	Return    bool   `xml:"return"`
}

// revokeIngress answers RevokeSecurityGroupIngress: GroupId's group loses
// the rules; a rule it does not have is InvalidPermission.NotFound (and
// none is removed), an unknown group InvalidGroup.NotFound.
func (s *Server) revokeIngress(r *http.Request) (any, int, *apiError) {
	id := r.Form.Get("GroupId")
	rules, aerr := ingressRules(r)
	if aerr != nil {
		return nil, 0, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.ContainsFunc(s.groups, func(g *SecurityGroup) bool { return g.ID == id }) {
		return nil, 0, badRequest("InvalidGroup.NotFound", "The security group '%s' does not exist", id)
	}
	kept := slices.Clone(s.ingress[id])
	for _, ru := range rules {
		i := slices.IndexFunc(kept, sameRule(ru))
		if i < 0 {
			return nil, 0, badRequest("InvalidPermission.NotFound", "The specified rule does not exist in this security group.")
		}
		kept = slices.Delete(kept, i, i+1)
	}
	s.ingress[id] = kept
	return returnResponse{XMLName: xml.Name{Local: "RevokeSecurityGroupIngressResponse"}, XMLNS: Namespace, RequestID: s.requestID(), Return: true}, len(rules), nil
}

// deleteSecurityGroup answers DeleteSecurityGroup (by GroupId): a group a
// classic load balancer still uses is DependencyViolation, as EC2 answers
// while a load balancer holds the group's interfaces; an unknown group is
// InvalidGroup.NotFound.
func (s *Server) deleteSecurityGroup(r *http.Request) (any, int, *apiError) {
	id := r.Form.Get("GroupId")
	if id == "" {
		return nil, 0, badRequest("MissingParameter", "The request must contain the parameter GroupId")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.groups, func(g *SecurityGroup) bool { return g.ID == id })
	if i < 0 {
		return nil, 0, badRequest("InvalidGroup.NotFound", "The security group '%s' does not exist", id)
	}
	for _, lb := range s.elbs {
		if slices.Contains(lb.groups, id) {
			return nil, 0, badRequest("DependencyViolation", "resource %s has a dependent object", id)
		}
	}
	for _, lb := range s.nlbs {
		if slices.Contains(lb.groups, id) {
			return nil, 0, badRequest("DependencyViolation", "resource %s has a dependent object", id)
		}
	}
	s.groups = slices.Delete(s.groups, i, i+1)
	delete(s.ingress, id)
	return returnResponse{XMLName: xml.Name{Local: "DeleteSecurityGroupResponse"}, XMLNS: Namespace, RequestID: s.requestID(), Return: true}, 1, nil
}

// Ingress returns a group's ingress rules, one source each, in the order
// they were added: "proto:from-to<-source" (source: a CIDR or a group ID;
// -1 ports: all).
func (s *Server) Ingress(groupID string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []string
	for _, ru := range s.ingress[groupID] {
		out = append(out, fmt.Sprintf("%s:%d-%d<-%s%s", ru.protocol, ru.fromPort, ru.toPort, ru.cidr, ru.groupID))
	}
	return out
}

// Groups returns the IDs of the Region's security groups, in creation order.
func (s *Server) Groups() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []string
	for _, g := range s.groups {
		out = append(out, g.ID)
	}
	return out
}
