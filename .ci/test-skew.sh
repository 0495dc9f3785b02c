#!/usr/bin/env bash
# make test-skew (opt-in, not part of make test): the AWS CCM's e2e tests
# (providers/aws/cmd/cloud-controller-manager: TestE2E, TestE2EDropIn, TestE2ENotFoundGuard,
# TestE2EShadow) against the previous Kubernetes minor's kube-apiserver — the lower end of the
# control-plane range the binary supports (docs/versions.md). The control plane is built by
# .ci/control-plane.sh from the tools module SKEW_TOOLS (default .ci/k8s-tools-prev,
# k8s.io/kubernetes v1.36.3 and the etcd it pins), cached under its own key (~7 min cold on
# 2 cores, instant after). The test log is kept in $OUT_DIR/test-skew.log.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${CLOUDGATE_CACHE_DIR:-$HOME/.cache/cloudgate}
tools=${SKEW_TOOLS:-$root/.ci/k8s-tools-prev}
out=${OUT_DIR:-$root/_out}
GO=${GO:-go}
mkdir -p "$cache" "$out"
envf=$cache/control-plane-skew.env
CLOUDGATE_K8S_TOOLS=$tools GO=$GO bash "$root/.ci/control-plane.sh" > "$envf.tmp"
mv "$envf.tmp" "$envf"
apiserver=$(sed -n 's/^CLOUDGATE_KUBE_APISERVER=//p' "$envf")
etcd=$(sed -n 's/^CLOUDGATE_ETCD=//p' "$envf")
plane="$("$apiserver" --version), etcd $("$etcd" --version | sed -n 's/^etcd Version: //p')"
echo "test-skew: control plane: $plane"
start=$SECONDS
set +e
(cd "$root/providers/aws" && env $(cat "$envf") "$GO" test -race -count=1 -timeout 40m -v ./cmd/cloud-controller-manager/) > "$out/test-skew.log" 2>&1
rc=$?
set -e
grep -E '^(--- (PASS|FAIL|SKIP)|ok |FAIL|panic)' "$out/test-skew.log" || true
echo "test-skew: $plane; go test exit $rc after $((SECONDS - start)) s; log: $out/test-skew.log"
exit $rc
