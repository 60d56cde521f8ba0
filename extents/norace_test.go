//go:build !race

package extents

const raceEnabled = false
