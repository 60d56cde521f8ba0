package layerfs

import "sort"

// sortNames orders names bytewise, the order trees keep.
func sortNames(names []string) { sort.Strings(names) }
