//go:build race

package extents

// raceEnabled scales big tests down under the race detector, which slows
// the chunker about tenfold.
const raceEnabled = true
