// Package metrics exports cloudgate's Prometheus metrics: upstream calls and
// their latency, limiter rates, waits and cloud throttling, quota
// utilisation, cache effectiveness, circuit-breaker state, batch sizes, the
// fleet-wide quota and shadow mode (docs/monitoring.md lists every series).
//
// A [Metrics] is one set of collectors; several cloudgate instances (told
// apart by their provider label) may share one. [Default] is registered into
// k8s.io/component-base's legacyregistry ([RegisterLegacy]), which is what a
// cloud-controller-manager serves on its secure /metrics; library users and
// the benchmark can register any *Metrics into their own
// prometheus.Registerer and pass it as provider.Config.Metrics.
//
// The cache, limiter and provider packages report through small observer
// interfaces; their wiring to the collectors is internal
// (internal/recorder), so this package's API is only what a user needs.
package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/cloudgate/cloudgate/internal/recorder"
	"github.com/cloudgate/cloudgate/limiter/fleet"
)

// QuotaWindow is the window of cloudgate_quota_utilization_ratio.
const QuotaWindow = recorder.QuotaWindow

// Metrics is one set of cloudgate collectors, registered nowhere until
// Register (or RegisterLegacy for Default).
type Metrics struct {
	r *recorder.Metrics
}

// Recorders returns the recorders cloudgate's provider writes through. Their
// type is internal to this module: outside it, Register, Collectors and Fleet
// are the API.
func (m *Metrics) Recorders() *recorder.Metrics { return m.r }

// Fleet returns the observer of a fleet member (package limiter/fleet) that
// reports it in m's cloudgate_fleet_* series under the provider and account
// labels, with the families' admission series made at zero. The cloudgate
// provider makes its own from limits.shared; this is for a member run
// without it, as a tool sharing the account's budget would.
func (m *Metrics) Fleet(provider, account string, families ...string) fleet.Observer {
	r := m.r.Fleet(provider, account)
	r.Init(families)
	return r
}

// New returns a set of collectors, registered nowhere.
func New() *Metrics { return &Metrics{r: recorder.New()} }

// Collectors returns every collector of m, for registering by hand.
func (m *Metrics) Collectors() []prometheus.Collector { return m.r.Collectors() }

// Register registers m's collectors with r.
func (m *Metrics) Register(r prometheus.Registerer) error { return m.r.Register(r) }

// Default is the process-wide set used when a cloudgate provider is built
// without its own; RegisterLegacy puts it on the CCM's /metrics.
var Default = New()

var legacyOnce sync.Once

// RegisterLegacy registers Default into k8s.io/component-base's
// legacyregistry, the registry a cloud-controller-manager serves on its
// secure /metrics. Safe to call more than once.
func RegisterLegacy() {
	legacyOnce.Do(func() {
		for _, c := range Default.Collectors() {
			legacyregistry.RawMustRegister(c)
		}
	})
}
