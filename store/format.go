package store

import (
	"fmt"

	"github.com/layerfs/layerfs/extents"
)

// chunkerSpec describes how file bytes are cut into chunks and nodes. It is
// part of the format: content cut differently would not dedupe against what
// the Store holds, so a Store refuses a build that cuts differently.
func chunkerSpec() string {
	return fmt.Sprintf("rabin pol=%#x min=%d max=%d small=%d fanout-bits=%d fanout=%d..%d",
		uint64(extents.Polynomial), extents.ChunkMin, extents.ChunkMax, extents.SmallFileMax,
		extents.FanoutBits, extents.MinFanout, extents.MaxFanout)
}

// formatMeta is what a new Store records about its format.
func formatMeta() map[string]string {
	return map[string]string{"chunker": chunkerSpec(), "trees": treeSpec()}
}

func checkFormatMeta(meta map[string]string) error {
	if got, want := meta["chunker"], chunkerSpec(); got != want {
		return fmt.Errorf("%w: the Store cuts files as %q, this layerfs as %q", ErrUnsupported, got, want)
	}
	if got, want := meta["trees"], treeSpec(); got != want {
		return fmt.Errorf("%w: the Store cuts directories as %q, this layerfs as %q", ErrUnsupported, got, want)
	}
	return nil
}
