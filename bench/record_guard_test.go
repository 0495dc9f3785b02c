package bench

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"
	fakecloud "k8s.io/cloud-provider/fake"

	"github.com/cloudgate/cloudgate/provider"
)

// TestGuardHoldCounted: the hold cloudgate's not-found guard really answers
// (from the provider, not a copy of its message) is counted as a hold, not
// as a controller error; other retryable errors stay errors.
func TestGuardHoldCounted(t *testing.T) {
	up := &fakecloud.Cloud{Provider: "fake", EnableInstancesV2: true, ExistsByProviderID: false}
	cg, err := provider.New(up, provider.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	i2, ok := cg.InstancesV2()
	if !ok {
		t.Fatal("no InstancesV2")
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Hour))},
		Spec: v1.NodeSpec{ProviderID: "fake://n1"}}
	_, err = i2.InstanceExists(context.Background(), node)
	var retry *cloudproviderapi.RetryError
	if !errors.As(err, &retry) {
		t.Fatalf("InstanceExists on a first \"does not exist\" = %v, want the guard's RetryError", err)
	}

	rec := newRecorder(up)
	rec.observe("InstanceExists", rec.begin(), err, false)
	rec.observe("InstanceExists", rec.begin(), cloudproviderapi.NewRetryError("throttled", time.Second), false)
	got := rec.snapshot()
	if got.Holds != 1 || got.Errors["InstanceExists"] != 1 {
		t.Errorf("holds %d, errors %v; want 1 hold and 1 error", got.Holds, got.Errors)
	}
}
