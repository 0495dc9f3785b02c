package bench

import "github.com/cloudgate/cloudgate/bench/simcloud"

// simWrite is a write-log record by request ID only.
type simWrite struct{ requestID string }

func toRecords(w []simWrite) []simcloud.WriteRecord {
	out := make([]simcloud.WriteRecord, len(w))
	for i, x := range w {
		out[i] = simcloud.WriteRecord{Seq: int64(i + 1), RequestID: x.requestID, Method: simcloud.MethodEnsureLoadBalancer}
	}
	return out
}
