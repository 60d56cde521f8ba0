//go:build !race

package layerfs

const raceEnabled = false
