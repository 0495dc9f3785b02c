package provider

import (
	"context"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"

	"github.com/cloudgate/cloudgate/cache"
	"github.com/cloudgate/cloudgate/limiter"
)

// TestBatchedMissWalk follows one batched InstanceMetadata miss in
// enforce mode through the code, by the call stacks at each place the miss
// reaches: its caller waiting for the answer, the lookup waiting in the
// batch, the batch waiting for its token, the batch call at the upstream,
// the cache fill, and the caller's copy. On every stack each file of the
// repository is one run of frames (entered once: nothing calls back into a
// file it left), and the stacks are the walk docs/architecture.md draws,
// in five files, bucket, breaker and recorder besides (calls that return).
func TestBatchedMissWalk(t *testing.T) {
	_, self, _, _ := runtime.Caller(0)
	w := &walkStacks{root: filepath.Dir(filepath.Dir(self)) + "/", at: map[string][]string{}}
	up := &walkCloud{batchCloud: &batchCloud{Cloud: &fake.Cloud{}}, w: w}
	c := mustNew(t, up, testConfig(newFakeClock()))
	defer c.(Cloud).Close()
	e := enf(c)
	m := e.m.batchInstanceStatus
	m.bucket = walkBucket{Admitter: m.bucket, w: w}
	var err error
	e.inst.metadata.c = newCache(e.gate, func(string) cache.Observer { return nil }, &err, e.m.instanceMetadata,
		cacheOpts[nodeKey, *cloudprovider.InstanceMetadata]{
			clone: func(md *cloudprovider.InstanceMetadata) *cloudprovider.InstanceMetadata {
				w.record("copy")
				return cloneMetadata(md)
			},
			keyString: nodeKey.String, shortLived: nodeByName,
		})
	if err != nil {
		t.Fatal(err)
	}
	md, err := v2(t, c).InstanceMetadata(context.Background(), testNode("n1", "fake://n1"))
	if err != nil || md.ProviderID != "fake://n1" {
		t.Fatalf("InstanceMetadata = %v, %v", md, err)
	}
	e.batch.Wait()
	if got := up.batchSizes(); len(got) != 1 || up.single != 0 {
		t.Fatalf("batch calls %v, calls of its own %d: want one batch call", got, up.single)
	}

	want := map[string][]string{
		"the caller, waiting for the answer":   {"provider/instancesv2.go", "provider/pipeline.go", "cache/cache.go"},
		"the lookup, waiting in the batch":     {"cache/cache.go", "provider/batching.go", "internal/batcher/batcher.go"},
		"the batch, waiting for its token":     {"internal/batcher/batcher.go", "provider/batching.go", "provider/pipeline.go"},
		"the batch call at the upstream":       {"internal/batcher/batcher.go", "provider/batching.go"},
		"the batch's answer filling the cache": {"internal/batcher/batcher.go", "provider/batching.go", "cache/cache.go"},
		"the caller's copy of the answer":      {"provider/instancesv2.go", "provider/pipeline.go", "cache/cache.go"},
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var files []string
	for where, stack := range w.at {
		for i, f := range stack {
			if slices.Contains(stack[:i], f) {
				t.Errorf("%s: %s entered twice: %v", where, f, stack)
			}
			if !slices.Contains(files, f) {
				files = append(files, f)
			}
		}
		t.Logf("%s: %s", where, strings.Join(stack, " → "))
	}
	for where, stack := range want {
		if got, ok := w.at[where]; !ok || !slices.Equal(got, stack) {
			t.Errorf("%s: stack %v, want %v", where, got, stack)
		}
	}
	if len(files) > 5 {
		t.Errorf("the walk enters %d files, want 5: %v", len(files), files)
	}
	// The callbacks the cache and the breaker make on the way (the copy,
	// the key, the key's lifetime, what counts against the breaker) are in
	// files not on the stacks they are called from: no file is entered
	// twice, callbacks included.
	caller, fill := w.at["the caller, waiting for the answer"], w.at["the batch's answer filling the cache"]
	for _, cb := range []struct {
		fn any
		on []string
	}{
		{cloneMetadata, append(slices.Clone(fill), w.at["the caller's copy of the answer"]...)},
		{nodeKey.String, caller},
		{nodeByName, append(slices.Clone(caller), fill...)},
		{(*gate).notACloudFailure, append(slices.Clone(w.at["the batch call at the upstream"]), "provider/pipeline.go", "limiter/breaker.go")},
	} {
		file, _ := runtime.FuncForPC(reflect.ValueOf(cb.fn).Pointer()).FileLine(0)
		rel, ok := strings.CutPrefix(file, w.root)
		if !ok {
			t.Fatalf("a callback's file %q is not the repository's", file)
		}
		if slices.Contains(cb.on, rel) {
			t.Errorf("a callback in %s is called from a stack that holds it: %v", rel, cb.on)
		}
	}
}

// walkStacks records a stack per place, as the repository's files on it,
// outermost first, one entry per run of frames of one file (test files
// left out).
type walkStacks struct {
	root string
	mu   sync.Mutex
	at   map[string][]string
}

func (w *walkStacks) record(where string) {
	pcs := make([]uintptr, 100)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	var stack, funcs []string
	for {
		f, more := frames.Next()
		funcs = append(funcs, f.Function)
		if rel, ok := strings.CutPrefix(f.File, w.root); ok && !strings.HasSuffix(rel, "_test.go") {
			stack = append(stack, rel)
		}
		if !more {
			break
		}
	}
	if where == "copy" {
		where = "the caller's copy of the answer"
		for _, fn := range funcs {
			switch {
			case strings.Contains(fn, ".PutSinceFor"):
				where = "the batch's answer filling the cache"
			case strings.Contains(fn, "singleflight"):
				return // the flight's own copy of what it stores
			}
		}
	}
	w.add(where, stack)
}

// add records stack (innermost first) at where, runs of one file merged.
func (w *walkStacks) add(where string, stack []string) {
	slices.Reverse(stack)
	stack = slices.Compact(stack)
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.at[where]; !ok {
		w.at[where] = stack
	}
}

// goroutines records, from a dump of every goroutine's stack, the caller
// of the test waiting for its answer and the lookup waiting in its batch.
func (w *walkStacks) goroutines() {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		var stack []string
		for _, line := range strings.Split(g, "\n") {
			file, ok := strings.CutPrefix(line, "\t"+w.root)
			if !ok {
				continue
			}
			file, _, _ = strings.Cut(file, ":")
			if !strings.HasSuffix(file, "_test.go") {
				stack = append(stack, file)
			}
		}
		switch {
		case strings.Contains(g, "TestBatchedMissWalk(") && strings.Contains(g, "InstanceMetadata("):
			w.add("the caller, waiting for the answer", stack)
		case strings.Contains(g, "nodeFetch[...]).fetch(") && strings.Contains(g, "Batcher[...]).Add("):
			w.add("the lookup, waiting in the batch", stack)
		}
	}
}

// walkCloud records the stacks at its batch call.
type walkCloud struct {
	*batchCloud
	w *walkStacks
}

func (c *walkCloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return c, true }

func (c *walkCloud) BatchInstanceStatus(ctx context.Context, nodes []*v1.Node) ([]InstanceStatus, error) {
	c.w.record("the batch call at the upstream")
	c.w.goroutines()
	return c.batchCloud.BatchInstanceStatus(ctx, nodes)
}

// walkBucket records the stack of a token wait.
type walkBucket struct {
	limiter.Admitter
	w *walkStacks
}

func (b walkBucket) Wait(ctx context.Context, p limiter.Priority) error {
	b.w.record("the batch, waiting for its token")
	return b.Admitter.Wait(ctx, p)
}
