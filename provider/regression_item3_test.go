package provider

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/cloud-provider/fake"
)

// Item 3: never more than MaxBatchSize nodes in a batch; flush never
// deadlocks with a fake clock running timer callbacks.
func TestRegression_BatchNeverExceedsMaxBatchSize(t *testing.T) {
	up := &batchCloud{Cloud: &fake.Cloud{Provider: "fake"}, missing: map[string]bool{}, maxBatch: 2}
	clk := newFakeClock()
	cfg := testConfig(clk)
	i := v2(t, mustNew(t, up, cfg))
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for k := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprint("node-", k)
			md, err := i.InstanceMetadata(context.Background(), testNode(name, ""))
			if err == nil && md.ProviderID != "fake://"+name {
				err = fmt.Errorf("%s got %s", name, md.ProviderID)
			}
			errs <- err
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	stepperDone := make(chan struct{})
	go func() {
		// Steps in its own goroutine: a deadlock inside Step must not hang
		// the test.
		defer close(stepperDone)
		for {
			select {
			case <-done:
				return
			default:
				clk.Step(time.Millisecond)
				time.Sleep(50 * time.Microsecond)
			}
		}
	}()
	select {
	case <-stepperDone:
	case <-time.After(20 * time.Second):
		t.Fatal("callers still waiting after 20s: flush deadlocked with the fake clock")
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range up.batchSizes() {
		if s > 2 {
			t.Fatalf("batch sizes %v: a batch above MaxBatchSize 2", up.batchSizes())
		}
	}
}
