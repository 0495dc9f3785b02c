package provider

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/cloudgate/cloudgate/limiter/fleet"
)

// Kubernetes Events for the fleet's fallback transitions (limits.shared).
//
// Where: one Event per transition in the namespace kube-system, whose
// involvedObject is that Namespace. The fallback state belongs to this
// cloud-controller-manager process, not to a Node; the CCM's leader-election
// Lease is optional and named by the deployment, while kube-system always
// exists, is where a CCM runs, and `kubectl get events -n kube-system` (and
// every event exporter) shows it. Reasons: CloudgateRedisFallback (Warning)
// and CloudgateRedisRejoined (Normal).
const (
	fleetEventNamespace      = "kube-system"
	fleetEventReasonFallback = "CloudgateRedisFallback"
	fleetEventReasonRejoined = "CloudgateRedisRejoined"
	fleetEventTimeout        = 5 * time.Second
)

// fleetEvents is the fleet's Observer: the metrics recorder's, plus an Event
// per fallback transition once Initialize gave it a client. Creating the
// Event never blocks the caller (a goroutine, bounded by fleetEventTimeout).
type fleetEvents struct {
	fleet.Observer
	account string

	mu       sync.Mutex
	client   kubernetes.Interface // nil before Initialize
	member   string
	instance string
	wg       sync.WaitGroup
}

func newFleetEvents(obs fleet.Observer, account string) *fleetEvents {
	host, _ := os.Hostname()
	return &fleetEvents{Observer: obs, account: account, instance: host}
}

// initialize takes the kube client from the CCM's client builder.
func (e *fleetEvents) initialize(b cloudprovider.ControllerClientBuilder, member string) {
	if b == nil {
		return
	}
	c, err := b.Client(clientName)
	if err != nil {
		klog.ErrorS(err, "cloudgate: fleet has no Kubernetes client for fallback Events", "account", e.account)
		return
	}
	e.mu.Lock()
	e.client, e.member = c, member
	e.mu.Unlock()
}

// FallbackChanged implements fleet.Observer.
func (e *fleetEvents) FallbackChanged(fallback bool) {
	e.Observer.FallbackChanged(fallback)
	e.mu.Lock()
	c, member := e.client, e.member
	if c != nil {
		e.wg.Add(1)
	}
	e.mu.Unlock()
	if c == nil {
		return // before Initialize: the metric and the log line report it
	}
	now := metav1.Now()
	ev := &corev1.Event{
		// Named as client-go's event recorder names them: object.hex(ns).
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", fleetEventNamespace, now.UnixNano()), Namespace: fleetEventNamespace},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: "v1", Kind: "Namespace", Name: fleetEventNamespace,
		},
		Reason: fleetEventReasonRejoined,
		Message: fmt.Sprintf("cloudgate fleet %q: Redis answers again; member %s is back on the shared budget",
			e.account, member),
		Type:                corev1.EventTypeNormal,
		Source:              corev1.EventSource{Component: "cloudgate", Host: e.instance},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		ReportingController: "cloudgate",
		ReportingInstance:   e.instance,
	}
	if fallback {
		ev.Reason, ev.Type = fleetEventReasonFallback, corev1.EventTypeWarning
		ev.Message = fmt.Sprintf("cloudgate fleet %q: Redis unavailable or slow; member %s serves from its local share of the quota until Redis answers (cloudgate_fleet_fallback)",
			e.account, member)
	}
	go func() {
		defer e.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), fleetEventTimeout)
		defer cancel()
		if _, err := c.CoreV1().Events(fleetEventNamespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			klog.V(2).InfoS("cloudgate: fleet Event not created", "account", e.account, "reason", ev.Reason, "err", err)
		}
	}()
}

// wait waits for the Events being created.
func (e *fleetEvents) wait() { e.wg.Wait() }
