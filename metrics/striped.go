package metrics

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
)

// Counters on the read hot path (cache hits, requests) are counted in
// stripes, each on a cache line of its own, and summed at scrape time. A
// prometheus.Counter is one word that every CPU writes: reads of cached
// answers from several CPUs then pass its cache line back and forth, and
// stop scaling with the CPUs. The exposition is a prometheus.CounterVec's:
// same name, help, type, labels, values, and created timestamp.

// numStripes is the number of stripes of a stripedCounter (a power of two).
const numStripes = 16

// stripedCounterVec is a CounterVec whose children are stripedCounters.
type stripedCounterVec struct {
	desc *prometheus.Desc

	mu       sync.Mutex
	children map[string]*stripedCounter // by label values joined with "\xff"
}

func newStripedCounterVec(name, help string, labels ...string) *stripedCounterVec {
	return &stripedCounterVec{
		desc:     prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, labels, nil),
		children: map[string]*stripedCounter{},
	}
}

// WithLabelValues returns the counter of the label values lvs (in the
// order of the vector's labels), creating it at zero. Resolve it once:
// this takes a lock.
func (v *stripedCounterVec) WithLabelValues(lvs ...string) *stripedCounter {
	key := strings.Join(lvs, "\xff")
	v.mu.Lock()
	defer v.mu.Unlock()
	c, ok := v.children[key]
	if !ok {
		c = &stripedCounter{labels: append([]string(nil), lvs...), created: time.Now()}
		v.children[key] = c
	}
	return c
}

// Describe implements prometheus.Collector.
func (v *stripedCounterVec) Describe(ch chan<- *prometheus.Desc) { ch <- v.desc }

// Collect implements prometheus.Collector: one counter per child, its
// stripes summed.
func (v *stripedCounterVec) Collect(ch chan<- prometheus.Metric) {
	v.mu.Lock()
	children := make([]*stripedCounter, 0, len(v.children))
	for _, c := range v.children {
		children = append(children, c)
	}
	v.mu.Unlock()
	for _, c := range children {
		ch <- prometheus.MustNewConstMetricWithCreatedTimestamp(v.desc, prometheus.CounterValue, float64(c.value()), c.created, c.labels...)
	}
}

// stripedCounter is a counter kept in numStripes stripes. Inc adds to the
// calling goroutine's stripe, chosen from the address of its stack: two
// goroutines running on two CPUs most likely use two stripes, so neither
// writes a cache line the other one reads or writes. Any choice of stripe
// is correct; the sum is the count.
type stripedCounter struct {
	// The read-only fields fill the first cache line (Inc's nil check
	// reads it): were a stripe there, every Inc would read a line that
	// some goroutine writes.
	labels  []string
	created time.Time
	_       [64 - 24 - 24]byte
	stripes [numStripes]struct {
		n atomic.Uint64
		_ [56]byte // one stripe per 64-byte cache line
	}
}

// Inc adds 1.
func (c *stripedCounter) Inc() { c.stripes[stripe()].n.Add(1) }

// value returns the sum of the stripes.
func (c *stripedCounter) value() uint64 {
	var n uint64
	for i := range c.stripes {
		n += c.stripes[i].n.Load()
	}
	return n
}

// stripe returns the stripe of the calling goroutine: goroutine stacks are
// at least 8 KiB and aligned to their size, so the address of a local
// variable shifted by 13 bits tells goroutines apart (a stack that grows
// moves, and its goroutine may change stripe: harmless). The multiply
// spreads consecutive stacks over the stripes.
func stripe() int {
	var local byte
	sp := uint64(uintptr(unsafe.Pointer(&local)))
	return int((sp >> 13) * 0x9e3779b97f4a7c15 >> (64 - 4))
}
