package layerfs

import (
	"github.com/layerfs/layerfs/store"
)

// Options control Open.
type Options struct {
	// Durability: store.Normal (the default), store.Fast or store.Full.
	Durability store.Durability
	// Create makes a new, empty Store when none exists at the path.
	Create bool
	// ReadOnly opens without the right to write.
	ReadOnly bool
}

// Store is an open LayerFS Store.
type Store struct {
	s *store.Store
}

// Open opens the Store file at path.
func Open(path string, opts Options) (*Store, error) {
	s, err := store.Open(path, store.Options{Durability: opts.Durability, Create: opts.Create, ReadOnly: opts.ReadOnly})
	if err != nil {
		return nil, err
	}
	return &Store{s: s}, nil
}

// Close closes the Store.
func (st *Store) Close() error { return st.s.Close() }

// Backend returns the underlying store for operator tools (stats, fsck,
// refs).
func (st *Store) Backend() *store.Store { return st.s }
