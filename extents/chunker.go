package extents

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/restic/chunker"
)

// chunkers recycles restic chunkers: each owns a 512 KiB read buffer.
var chunkers = sync.Pool{New: func() any {
	return chunker.NewWithBoundaries(nil, Polynomial, ChunkMin, ChunkMax)
}}

// newChunker returns a chunker over r with LayerFS's parameters.
func newChunker(r io.Reader) *chunker.Chunker {
	c := chunkers.Get().(*chunker.Chunker)
	c.ResetWithBoundaries(r, Polynomial, ChunkMin, ChunkMax)
	c.SetAverageBits(chunkAverageBits)
	return c
}

func releaseChunker(c *chunker.Chunker) {
	c.ResetWithBoundaries(nil, Polynomial, ChunkMin, ChunkMax)
	chunkers.Put(c)
}

// realCut reports whether a chunk that ended because its input ended would
// also have ended there had more input followed: the chunker cuts after the
// byte that makes a chunk ChunkMax long, or after a byte where the rolling
// hash matches once the chunk is at least ChunkMin long. Both depend only on
// the chunk's own bytes, since the chunker resets its hash at every cut.
func realCut(c chunker.Chunk) bool {
	return c.Length >= ChunkMax || (c.Length >= ChunkMin && c.Cut&chunkSplitMask == 0)
}

// chunkBufs recycles cutChunks's chunk buffers: one per call, and a
// Workspace's capture of a small edit calls it for every run it re-cuts.
var chunkBufs = sync.Pool{New: func() any { return new([ChunkMax]byte) }}

// cutChunks feeds every chunk of r to fn, in order. The slice passed to fn
// is reused for the next chunk. cut says whether the chunk ended at a
// real cut or only because r ended.
func cutChunks(r io.Reader, fn func(data []byte, cut bool) error) error {
	c := newChunker(r)
	defer releaseChunker(c)
	bp := chunkBufs.Get().(*[ChunkMax]byte)
	defer chunkBufs.Put(bp)
	buf := bp[:0]
	for {
		ch, err := c.Next(buf)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("cut chunks: %w", err)
		}
		buf = ch.Data[:0]
		if err := fn(ch.Data, realCut(ch)); err != nil {
			return err
		}
	}
}
