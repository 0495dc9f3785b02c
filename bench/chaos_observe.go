package bench

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cloudgate/cloudgate/limiter"
)

// What the chaos scenario observes besides the controllers' calls:
// cloudgate's breaker metrics, and quiescence with removals counted once
// due.

// readBreakerOpens sums the read family's transitions to open.
func readBreakerOpens(reg *prometheus.Registry) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		return 0
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "cloudgate_breaker_transitions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["family"] == "read" && labels["to"] == limiter.StateOpen.String() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

// breakerStates reads each family's breaker state gauge.
func breakerStates(reg *prometheus.Registry) map[string]string {
	mfs, err := reg.Gather()
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for _, mf := range mfs {
		if mf.GetName() != "cloudgate_breaker_state" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "family" {
					out[l.GetValue()] = limiter.State(int(m.GetGauge().GetValue())).String()
				}
			}
		}
	}
	return out
}

// watchDue polls from the outage's end until ctx ends and returns the
// first time (simulated seconds since from) at which every condition of
// quiescence held, a removed instance's Node counting only once due
// (dueAt; zero: due at once); nil if never.
func (r *colRun) watchDue(ctx context.Context, from time.Time, dueAt func(node string) time.Time) *float64 {
	for {
		q, err := r.c.Quiescence()
		if err == nil && q.NodesInitialized && q.LBsCurrent && q.RoutesMatch && q.NoneWaiting {
			overdue := false
			if !q.NodesGone {
				nodes, err := r.c.kube.CoreV1().Nodes().List(r.c.ctx, metav1.ListOptions{})
				overdue = err != nil
				for i := 0; err == nil && i < len(nodes.Items); i++ {
					name := nodes.Items[i].Name
					if _, ok := r.srv.InstanceByNodeName(name); !ok && !time.Now().Before(dueAt(name)) {
						overdue = true
					}
				}
			}
			if !overdue {
				v := time.Since(from).Seconds() * r.spec.f
				return &v
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(5 * time.Millisecond):
		}
	}
}
