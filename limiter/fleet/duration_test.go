package fleet_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cloudgate/cloudgate/limiter/fleet"
)

// Duration reads and writes the Go duration strings of the config files
// (charts/ values, docs/fleet.md), and refuses a bare number, which would
// otherwise be read as nanoseconds.
func TestDurationJSON(t *testing.T) {
	var c struct {
		D fleet.Duration `json:"d"`
	}
	if err := json.Unmarshal([]byte(`{"d":"1m30s"}`), &c); err != nil || c.D.Duration != 90*time.Second {
		t.Fatalf("unmarshal \"1m30s\": %v, %v", c.D, err)
	}
	out, err := json.Marshal(c)
	if err != nil || string(out) != `{"d":"1m30s"}` {
		t.Fatalf("marshal: %s, %v", out, err)
	}
	for _, bad := range []string{`{"d":30}`, `{"d":"30"}`, `{"d":"soon"}`, `{"d":true}`} {
		if err := json.Unmarshal([]byte(bad), &c); err == nil || !strings.Contains(err.Error(), "duration string") {
			t.Errorf("unmarshal %s: err %v, want one asking for a duration string", bad, err)
		}
	}
}
