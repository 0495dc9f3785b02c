package simcloud

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
)

// loadBalancer implements cloudprovider.LoadBalancer. Load balancers are
// named cloudprovider.DefaultLoadBalancerName(service); their hosts are the
// node names.
type loadBalancer struct{ c *Cloud }

var _ cloudprovider.LoadBalancer = (*loadBalancer)(nil)

func lbStatus(lb *loadBalancerJSON) *v1.LoadBalancerStatus {
	mode := v1.LoadBalancerIPModeVIP
	return &v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: lb.IngressIP, IPMode: &mode}}}
}

func lbPath(service *v1.Service) string {
	return "/v1/loadbalancers/" + url.PathEscape(cloudprovider.DefaultLoadBalancerName(service))
}

// GetLoadBalancer is nil, false, nil when the load balancer does not exist.
func (l *loadBalancer) GetLoadBalancer(ctx context.Context, _ string, service *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	if service == nil {
		return nil, false, errors.New("simcloud: nil service")
	}
	var lb loadBalancerJSON
	err := l.c.do(ctx, MethodGetLoadBalancer, http.MethodGet, lbPath(service), nil, nil, &lb)
	if isNotFound(err, CodeLoadBalancerNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return lbStatus(&lb), true, nil
}

// GetLoadBalancerName is cloudprovider.DefaultLoadBalancerName.
func (l *loadBalancer) GetLoadBalancerName(_ context.Context, _ string, service *v1.Service) string {
	return cloudprovider.DefaultLoadBalancerName(service)
}

// EnsureLoadBalancer creates or updates the load balancer with one
// EnsureLoadBalancer call.
func (l *loadBalancer) EnsureLoadBalancer(ctx context.Context, clusterName string, service *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	if service == nil {
		return nil, errors.New("simcloud: nil service")
	}
	if err := l.c.snap.refresh(ctx, l.c, nodes); err != nil {
		return nil, err
	}
	req := ensureLBRequest{Cluster: clusterName, Hosts: make([]string, 0, len(nodes))}
	if req.Cluster == "" {
		req.Cluster = l.c.cfg.ClusterName
	}
	for _, n := range nodes {
		if n != nil {
			req.Hosts = append(req.Hosts, n.Name)
		}
	}
	for _, p := range service.Spec.Ports {
		req.Ports = append(req.Ports, lbPortJSON{Name: p.Name, Protocol: string(p.Protocol), Port: p.Port, NodePort: p.NodePort})
	}
	var lb loadBalancerJSON
	if err := l.c.do(ctx, MethodEnsureLoadBalancer, http.MethodPut, lbPath(service), nil, req, &lb); err != nil {
		return nil, err
	}
	return lbStatus(&lb), nil
}

// UpdateLoadBalancer is EnsureLoadBalancer without the status: the API has
// one idempotent ensure call for both.
func (l *loadBalancer) UpdateLoadBalancer(ctx context.Context, clusterName string, service *v1.Service, nodes []*v1.Node) error {
	_, err := l.EnsureLoadBalancer(ctx, clusterName, service, nodes)
	return err
}

// EnsureLoadBalancerDeleted is idempotent: deleting an absent load
// balancer succeeds.
func (l *loadBalancer) EnsureLoadBalancerDeleted(ctx context.Context, _ string, service *v1.Service) error {
	if service == nil {
		return errors.New("simcloud: nil service")
	}
	return l.c.do(ctx, MethodDeleteLoadBalancer, http.MethodDelete, lbPath(service), nil, nil, &deleteResponse{})
}

// lbSnapshot is ClientConfig.LBInstanceSnapshot's listing of every
// instance: its IDs and when it was taken.
type lbSnapshot struct {
	mu  sync.Mutex
	at  time.Time
	ids map[string]bool
}

// refresh lists every instance unless the last listing is young enough and
// holds every node's instance (nodes without a provider ID are skipped, as
// the AWS provider skips them).
func (s *lbSnapshot) refresh(ctx context.Context, c *Cloud, nodes []*v1.Node) error {
	maxAge := c.cfg.LBInstanceSnapshot
	if maxAge <= 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fresh := s.ids != nil && time.Since(s.at) <= maxAge
	for _, n := range nodes {
		if !fresh {
			break
		}
		if n == nil || n.Spec.ProviderID == "" {
			continue
		}
		if _, id, err := ParseProviderID(n.Spec.ProviderID); err == nil && !s.ids[id] {
			fresh = false
		}
	}
	if fresh {
		return nil
	}
	at := time.Now()
	ids := map[string]bool{}
	lister := &instancesV2{c: c}
	for tok := ""; ; {
		page, next, err := lister.listPage(ctx, tok, false)
		if err != nil {
			return err
		}
		for _, r := range page {
			if _, id, err := ParseProviderID(r.Metadata.ProviderID); err == nil {
				ids[id] = true
			}
		}
		if next == "" {
			break
		}
		tok = next
	}
	s.at, s.ids = at, ids
	return nil
}
