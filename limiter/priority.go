package limiter

import "strconv"

// Priority orders waiters when tokens are scarce: lower value goes first.
// Within one priority waiters are served in arrival order (FIFO).
// Priority is strict: a lower-priority waiter is served only when no
// higher-priority waiter is queued, so a write (PriorityCritical) never
// waits behind queued reads, and a later arrival of higher priority goes
// before earlier arrivals of lower priority.
//
// Values below PriorityCritical are treated as PriorityCritical and values
// above PriorityBackground as PriorityBackground.
type Priority int

const (
	// PriorityCritical is for writes and node initialisation.
	PriorityCritical Priority = iota
	// PriorityNormal is for ordinary reads.
	PriorityNormal
	// PriorityBackground is for periodic background resync reads.
	PriorityBackground
)

// numPriorities is the number of distinct queues a Bucket keeps.
const numPriorities = int(PriorityBackground) + 1

// String returns "critical", "normal" or "background", or "Priority(n)" for
// a value outside the defined range.
func (p Priority) String() string {
	switch p {
	case PriorityCritical:
		return "critical"
	case PriorityNormal:
		return "normal"
	case PriorityBackground:
		return "background"
	default:
		return "Priority(" + strconv.Itoa(int(p)) + ")"
	}
}

// index returns the queue index of p, clamping out-of-range values.
func (p Priority) index() int {
	switch {
	case p < PriorityCritical:
		return int(PriorityCritical)
	case p > PriorityBackground:
		return int(PriorityBackground)
	default:
		return int(p)
	}
}
