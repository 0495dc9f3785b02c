package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestFleetRejectsBadFlags: the fleet subcommand validates before it starts
// anything, and the error names the flag.
func TestFleetRejectsBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"fleet", "--columns", "local-full,everything"}, "--columns"},
		{[]string{"fleet", "--clusters", "1"}, "--clusters"},
		{[]string{"fleet", "--background-qps", "50"}, "--background-qps"},
		{[]string{"fleet", "--seeds", "0"}, "--seeds"},
	} {
		var stdout, stderr bytes.Buffer
		if err := run(tc.args, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one naming %s", tc.args, err, tc.want)
		}
	}
}
