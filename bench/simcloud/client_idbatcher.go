package simcloud

import (
	"context"
	"net/http"
	"sync"
	"time"

	cloudprovider "k8s.io/cloud-provider"
)

// IDBatcher is ClientConfig.IDBatcher: how the client merges concurrent
// lookups by instance ID into one BatchGetInstances call, as the AWS
// provider's describe-instance batcher merges DescribeInstances calls.
type IDBatcher struct {
	// Idle sends the pending lookups when no other joined for this long;
	// Max when the first has waited this long; MaxItems when that many
	// are pending.
	Idle, Max time.Duration
	MaxItems  int
}

// AWSDescribeBatcher is the AWS provider's describe-instance batcher
// (k8s.io/cloud-provider-aws pkg/providers/v1/describe_instance_batch.go).
var AWSDescribeBatcher = IDBatcher{Idle: 100 * time.Millisecond, Max: time.Second, MaxItems: 500}

// idBatcher merges lookups by ID (ClientConfig.IDBatcher).
type idBatcher struct {
	c   *Cloud
	cfg IDBatcher

	mu        sync.Mutex
	pending   []*idLookup
	idle, max *time.Timer
}

type idLookup struct {
	id   string
	done chan struct{}
	inst *instanceJSON
	err  error
}

// get looks id up in the next batch.
func (b *idBatcher) get(ctx context.Context, id string) (*instanceJSON, error) {
	l := &idLookup{id: id, done: make(chan struct{})}
	b.mu.Lock()
	b.pending = append(b.pending, l)
	if len(b.pending) == 1 {
		b.max = time.AfterFunc(b.cfg.Max, b.flush)
	}
	if b.idle != nil {
		b.idle.Stop()
	}
	b.idle = time.AfterFunc(b.cfg.Idle, b.flush)
	full := len(b.pending) >= b.cfg.MaxItems
	b.mu.Unlock()
	if full {
		b.flush()
	}
	select {
	case <-l.done:
		return l.inst, l.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// flush sends the pending lookups, if any, in one call.
func (b *idBatcher) flush() {
	b.mu.Lock()
	batch := b.pending
	b.pending = nil
	for _, t := range []*time.Timer{b.idle, b.max} {
		if t != nil {
			t.Stop()
		}
	}
	b.idle, b.max = nil, nil
	b.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	req := batchGetRequest{IDs: make([]string, len(batch))}
	for i, l := range batch {
		req.IDs[i] = l.id
	}
	var resp batchGetResponse
	err := b.c.do(context.Background(), MethodBatchGetInstances, http.MethodPost, "/v1/instances:batchGet", nil, req, &resp)
	for i, l := range batch {
		switch {
		case err != nil:
			l.err = err
		case i >= len(resp.ByID) || !resp.ByID[i].Found || resp.ByID[i].Instance == nil:
			l.err = cloudprovider.InstanceNotFound
		default:
			l.inst = resp.ByID[i].Instance
		}
		close(l.done)
	}
}
