//go:build race

package provider

// raceEnabled: the race detector slows every memory access; speed bounds
// do not apply.
const raceEnabled = true
