package bench

import "github.com/prometheus/client_golang/prometheus"

// shadowCalls sums cloudgate_shadow_upstream_calls_total: the calls a
// shadow column's cloudgate would have made (0 for other columns, or nil).
func shadowCalls(reg *prometheus.Registry) float64 {
	if reg == nil {
		return 0
	}
	mfs, err := reg.Gather()
	if err != nil {
		return 0
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == "cloudgate_shadow_upstream_calls_total" {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}
