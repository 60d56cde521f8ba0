package extents

import "errors"

// Errors returned by this package. Corrupt objects are reported by wrapping
// object.ErrCorrupt with the node or chunk being read.
var (
	// ErrInvalid says an argument is out of range: a negative offset or
	// size, or an edit that would make a file larger than an int64 can say.
	ErrInvalid = errors.New("invalid argument")
	// ErrNotFound says a MemStore does not hold the object asked for.
	ErrNotFound = errors.New("object not found")
	// ErrInjected is the failure a MemStore returns when told to fail.
	ErrInjected = errors.New("injected failure")

	// errWindowEnd stops cutting a window at a chunk that is not yet
	// known to end there; it never leaves the package.
	errWindowEnd = errors.New("end of window")
)
