//go:build linux

package e2e

import (
	"os"
	"os/exec"
	"testing"
)

// Tools returns the real etcd and kube-apiserver binaries (CLOUDGATE_ETCD,
// CLOUDGATE_KUBE_APISERVER, which make test builds and sets) and the go command an e2e test
// builds its CCM with. Without the binaries the test fails under CI or make (CI or
// CLOUDGATE_CACHE_DIR set) and skips otherwise.
func Tools(t *testing.T) (etcdBin, apiserverBin, goBin string) {
	t.Helper()
	etcdBin, apiserverBin = os.Getenv("CLOUDGATE_ETCD"), os.Getenv("CLOUDGATE_KUBE_APISERVER")
	if etcdBin == "" || apiserverBin == "" {
		msg := "CLOUDGATE_ETCD and CLOUDGATE_KUBE_APISERVER are not set: run `make test`, which builds a real etcd and kube-apiserver (.ci/control-plane.sh) and sets them"
		if os.Getenv("CI") != "" || os.Getenv("CLOUDGATE_CACHE_DIR") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the e2e test builds the CCM binary and needs the go command: %v", err)
	}
	return etcdBin, apiserverBin, goBin
}
