package provider

import (
	"reflect"
	"testing"
)

// TestMethodTableFillsEverySlot: every field of methodSet is filled by
// exactly one row of methodSpecs, with the row's name.
func TestMethodTableFillsEverySlot(t *testing.T) {
	g, err := newGate(newCountingCloud(), testConfig(newFakeClock()), gateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[*method]string{}
	for name, spec := range methodSpecs {
		m := *spec.slot(&g.m)
		switch {
		case m == nil:
			t.Errorf("%s: slot left empty", name)
		case m.name != name:
			t.Errorf("%s: slot holds %s", name, m.name)
		case seen[m] != "":
			t.Errorf("%s and %s share a slot", name, seen[m])
		}
		seen[m] = name
	}
	if n := reflect.TypeOf(g.m).NumField(); n != len(methodSpecs) {
		t.Errorf("methodSet has %d fields, the table %d rows", n, len(methodSpecs))
	}
}

func TestDefaultTTLsAreTheTable(t *testing.T) {
	ttls := DefaultTTLs()
	for name, spec := range methodSpecs {
		if ttls[name] != spec.defaultTTL {
			t.Errorf("%s: DefaultTTLs says %s, the table %s", name, ttls[name], spec.defaultTTL)
		}
	}
	ttls["InstanceMetadata"] = 0
	if DefaultTTLs()["InstanceMetadata"] == 0 {
		t.Error("DefaultTTLs hands out the table itself")
	}
}
