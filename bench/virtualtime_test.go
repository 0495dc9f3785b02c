package bench

import (
	"context"
	"testing"

	"github.com/cloudgate/cloudgate/bench/virtual"
)

// runVirtual runs o in virtual time, in a synctest bubble of t (with the
// stall watchdog outside it).
func runVirtual(t *testing.T, o *Options) *Report {
	t.Helper()
	var rep *Report
	err := virtual.Test(t, context.Background(), virtual.Options{}, func(ctx context.Context) error {
		var err error
		rep, err = Run(ctx, o, testWriter{t})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// runVirtualFn runs fn in virtual time, in a synctest bubble of t.
func runVirtualFn(t *testing.T, fn virtual.Func) error {
	t.Helper()
	err := virtual.Test(t, context.Background(), virtual.Options{}, fn)
	if err != nil {
		t.Fatal(err)
	}
	return err
}
