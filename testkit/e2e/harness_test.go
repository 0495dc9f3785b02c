package e2e

import (
	"net"
	"strconv"
	"testing"
)

// TestFreePortBelowEphemeral: FreePort's ports are below the kernel's ephemeral range (no
// outgoing connection can take one before the process binds it), distinct within the binary,
// and bindable.
func TestFreePortBelowEphemeral(t *testing.T) {
	lo, hi := portsBelowEphemeral()
	if lo < 1024 || hi <= lo {
		t.Fatalf("range [%d, %d)", lo, hi)
	}
	seen := map[int]bool{}
	for range 200 {
		p := FreePort(t)
		if p < lo || p >= hi {
			t.Fatalf("port %d outside [%d, %d)", p, lo, hi)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
	for p := range seen {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d: %v", p, err)
		}
		l.Close()
		break
	}
}
