//go:build race

package layerfs

// raceEnabled scales the multi-process tests down under the race detector,
// which slows every helper process about tenfold.
const raceEnabled = true
