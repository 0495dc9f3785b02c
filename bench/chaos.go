package bench

import (
	"context"
	"errors"
	"io"

	"github.com/cloudgate/cloudgate/bench/simcloud"
)

var zeroFaults simcloud.Faults

// ScenarioChaos injects faults on a schedule (see chaos scenario docs).
const ScenarioChaos = "chaos"

// ChaosSide holds the chaos invariants of one side.
type ChaosSide struct {
	WritesIssued          int64    `json:"writes_issued"`
	WritesLanded          int64    `json:"writes_landed"`
	WritesFailed          int64    `json:"writes_failed"`
	WritesLost            int64    `json:"writes_lost"`
	StaleReadsBeyondBound int64    `json:"stale_reads_beyond_bound"`
	NodesWronglyDeleted   int64    `json:"nodes_wrongly_deleted"`
	ConvergeSeconds       *float64 `json:"converge_seconds"`
}

func writeChaosRows(row func(name, a, b, ratio string), bare, cg *ChaosSide) {
	row("writes issued", d(bare.WritesIssued), d(cg.WritesIssued), "")
	row("writes landed", d(bare.WritesLanded), d(cg.WritesLanded), "")
	row("writes failed", d(bare.WritesFailed), d(cg.WritesFailed), "")
	row("writes lost", d(bare.WritesLost), d(cg.WritesLost), "")
	row("stale reads beyond bound", d(bare.StaleReadsBeyondBound), d(cg.StaleReadsBeyondBound), "")
	row("nodes wrongly deleted", d(bare.NodesWronglyDeleted), d(cg.NodesWronglyDeleted), "")
	row("converge (s)", secs(bare.ConvergeSeconds), secs(cg.ConvergeSeconds), "")
}

// chaosNodes is the chaos cluster's size.
func (o *Options) chaosNodes() int { return 200 }

func runChaos(ctx context.Context, o *Options, side string, progress io.Writer) (Side, float64, error) {
	return Side{}, 0, errors.New("chaos scenario: not implemented yet")
}
