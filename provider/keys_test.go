package provider

import (
	"testing"
)

// FuzzCacheKeys: two distinct nodes or services never share a cache entry,
// neither as map keys nor as in-flight de-duplication strings.
func FuzzCacheKeys(f *testing.F) {
	f.Add("a", "", "b", "", "c", "ns", "n", "u", "c", "ns", "n", "v")
	f.Add("x", "p", "p", "", "c/", "ns", "n", "u", "c", "/ns", "n", "u")
	f.Fuzz(func(t *testing.T, n1, p1, n2, p2, c1, ns1, s1, u1, c2, ns2, s2, u2 string) {
		k1, k2 := keyOfNode(testNode(n1, p1)), keyOfNode(testNode(n2, p2))
		if (k1 == k2) != (k1.String() == k2.String()) {
			t.Fatalf("node keys %#v and %#v: equality and rendering disagree", k1, k2)
		}
		same := p1 == p2 && (p1 != "" || n1 == n2)
		if (k1 == k2) != same {
			t.Fatalf("nodes (%q,%q) and (%q,%q): shared entry = %v, want %v", n1, p1, n2, p2, k1 == k2, same)
		}
		l1 := keyOfService(c1, testService(ns1, s1, u1))
		l2 := keyOfService(c2, testService(ns2, s2, u2))
		if (l1 == l2) != (l1.String() == l2.String()) {
			t.Fatalf("service keys %#v and %#v: equality and rendering disagree", l1, l2)
		}
		if (l1 == l2) != (c1 == c2 && ns1 == ns2 && s1 == s2 && u1 == u2) {
			t.Fatalf("distinct services share an entry: %#v %#v", l1, l2)
		}
	})
}
