package provider

import (
	"fmt"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
)

// TestCloneMetadataIsDeep checks the copy shares nothing a caller could
// write through and leaves no room to append in place, for address counts
// inside and beyond the inline room.
func TestCloneMetadataIsDeep(t *testing.T) {
	for _, n := range []int{-1, 0, 1, 2, 3, 4, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			m := &cloudprovider.InstanceMetadata{ProviderID: "p", Zone: "z", AdditionalLabels: map[string]string{"k": "v"}}
			if n >= 0 {
				m.NodeAddresses = make([]v1.NodeAddress, n)
				for i := range n {
					m.NodeAddresses[i] = v1.NodeAddress{Type: v1.NodeInternalIP, Address: fmt.Sprint("10.0.0.", i)}
				}
			}
			c := cloneMetadata(m)
			if !reflect.DeepEqual(c, m) {
				t.Fatalf("clone %+v differs from %+v", c, m)
			}
			if cap(c.NodeAddresses) != len(c.NodeAddresses) {
				t.Fatalf("clone has room to append in place: len %d cap %d", len(c.NodeAddresses), cap(c.NodeAddresses))
			}
			c.AdditionalLabels["k"] = "changed"
			for i := range c.NodeAddresses {
				c.NodeAddresses[i].Address = "changed"
			}
			c.NodeAddresses = append(c.NodeAddresses, v1.NodeAddress{Address: "appended"})
			if m.AdditionalLabels["k"] != "v" {
				t.Fatal("writing the clone's labels changed the original")
			}
			for _, a := range m.NodeAddresses {
				if a.Address == "changed" {
					t.Fatal("writing the clone's addresses changed the original")
				}
			}
		})
	}
	if cloneMetadata(nil) != nil {
		t.Fatal("clone of nil is not nil")
	}
}
