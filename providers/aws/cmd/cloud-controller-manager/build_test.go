//go:build linux

package main

import (
	"os"
	"testing"

	"github.com/cloudgate/cloudgate/testkit/e2e"
)

// ccmBuild is the CCM binary (go build -race of this package), built once per test run and
// shared by the e2e tests; TestMain removes it.
var ccmBuild = &e2e.Build{}

func TestMain(m *testing.M) {
	code := m.Run()
	ccmBuild.Remove()
	os.Exit(code)
}
