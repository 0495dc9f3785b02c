package main

import (
	"testing"

	"github.com/cloudgate/cloudgate/cmd/ccm/upstreams"
)

// cloudgate-config checks upstream.name against the providers of cloudgate's CCM binaries
// (upstreams.Known): each provider this binary registers must be among them, or the tool
// would refuse a file this CCM runs.
func TestKnownUpstreamsRegistered(t *testing.T) {
	if err := upstreams.Check("aws", "aws-batch"); err != nil {
		t.Error(err)
	}
}
