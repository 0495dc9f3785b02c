package bench

import "github.com/cloudgate/cloudgate/bench/simcloud"

// simWrite is a write-log record by request ID only.
// simWrite is one landed write of a test's write log; unchanged marks a
// landing that only confirmed state (WriteRecord.Changed false).
type simWrite struct {
	requestID string
	unchanged bool
}

func toRecords(w []simWrite) []simcloud.WriteRecord {
	out := make([]simcloud.WriteRecord, len(w))
	for i, x := range w {
		out[i] = simcloud.WriteRecord{Seq: int64(i + 1), RequestID: x.requestID, Method: simcloud.MethodEnsureLoadBalancer, Changed: !x.unchanged}
	}
	return out
}
