package provider

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/cloudgate/cloudgate/limiter/fleet"
)

// Kubernetes Events for the fleet's fallback transitions (limits.shared),
// recorded with client-go's event recorder (k8s.io/client-go/tools/events,
// the events.k8s.io/v1 API) as the CCM's own controllers record theirs.
//
// Where: in the namespace kube-system, regarding that Namespace. The
// fallback state belongs to this cloud-controller-manager process, not to a
// Node; the CCM's leader-election Lease is optional and named by the
// deployment, while kube-system always exists, is where a CCM runs, and
// `kubectl get events -n kube-system` (and every event exporter) shows it.
// Reasons: CloudgateRedisFallback (Warning, action Fallback) and
// CloudgateRedisRejoined (Normal, action Rejoin); reporting controller
// "cloudgate". A repeated transition becomes the first Event's series, as
// the recorder does for every controller.
//
// Who: the kube client named EventsClientName from the CCM's client builder;
// with --use-service-account-credentials=true that is the ServiceAccount
// kube-system/cloudgate, which the chart's and deploy/'s RBAC bind.
const (
	// EventsClientName is cloudgate's own kube client (with service-account
	// credentials, the ServiceAccount kube-system/cloudgate): it records
	// cloudgate's Events and reads the cluster's identity (clusterMemberID).
	EventsClientName = "cloudgate"

	fleetEventNamespace      = "kube-system"
	fleetEventReasonFallback = "CloudgateRedisFallback"
	fleetEventReasonRejoined = "CloudgateRedisRejoined"
)

// fleetEventRegarding is the kube-system Namespace; its namespace is set so
// that the Event is stored in kube-system (a cluster-scoped object's Events
// otherwise go to "default").
var fleetEventRegarding = &corev1.ObjectReference{
	APIVersion: "v1", Kind: "Namespace", Name: fleetEventNamespace, Namespace: fleetEventNamespace,
}

// fleetEvents is the fleet's Observer: the metrics recorder's, plus an Event
// per fallback transition once Initialize gave it a client. Recording never
// blocks the caller (the recorder queues, and drops when its queue is full).
type fleetEvents struct {
	fleet.Observer
	account string

	mu          sync.Mutex
	broadcaster events.EventBroadcaster // nil before Initialize and after close
	stop        context.CancelFunc      // the broadcaster's housekeeping
	recorder    events.EventRecorder
	member      string
}

func newFleetEvents(obs fleet.Observer, account string) *fleetEvents {
	return &fleetEvents{Observer: obs, account: account}
}

// initialize starts recording with the kube client from the CCM's client
// builder until stop is closed (or close). Called again (leader migration),
// it replaces the previous recorder.
func (e *fleetEvents) initialize(b cloudprovider.ControllerClientBuilder, member string, stop <-chan struct{}) {
	if b == nil {
		return
	}
	c, err := b.Client(EventsClientName)
	if err != nil {
		klog.ErrorS(err, "cloudgate: fleet has no Kubernetes client for fallback Events", "account", e.account)
		return
	}
	bc := events.NewBroadcaster(&events.EventSinkImpl{Interface: c.EventsV1()})
	ctx, cancel := context.WithCancel(wait.ContextForChannel(stop))
	if err := bc.StartRecordingToSinkWithContext(ctx); err != nil {
		klog.ErrorS(err, "cloudgate: fleet cannot record fallback Events", "account", e.account)
		cancel()
		bc.Shutdown()
		return
	}
	e.mu.Lock()
	old, oldStop := e.broadcaster, e.stop
	e.broadcaster, e.stop, e.recorder, e.member = bc, cancel, bc.NewRecorder(scheme.Scheme, "cloudgate"), member
	e.mu.Unlock()
	if old != nil {
		oldStop()
		old.Shutdown()
	}
}

// FallbackChanged implements fleet.Observer.
func (e *fleetEvents) FallbackChanged(fallback bool) {
	e.Observer.FallbackChanged(fallback)
	e.mu.Lock()
	rec, member := e.recorder, e.member
	e.mu.Unlock()
	if rec == nil {
		return // before Initialize: the metric and the log line report it
	}
	if fallback {
		rec.Eventf(fleetEventRegarding, nil, corev1.EventTypeWarning, fleetEventReasonFallback, "Fallback",
			"cloudgate fleet %q: Redis unavailable or slow; member %s serves from its local share of the quota until Redis answers (cloudgate_fleet_fallback)",
			e.account, member)
		return
	}
	rec.Eventf(fleetEventRegarding, nil, corev1.EventTypeNormal, fleetEventReasonRejoined, "Rejoin",
		"cloudgate fleet %q: Redis answers again; member %s is back on the shared budget", e.account, member)
}

// close stops recording; Events not yet written are dropped.
func (e *fleetEvents) close() {
	e.mu.Lock()
	bc, stop := e.broadcaster, e.stop
	e.broadcaster, e.stop, e.recorder = nil, nil, nil
	e.mu.Unlock()
	if bc != nil {
		stop()
		bc.Shutdown()
	}
}
