package store

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/layerfs/layerfs/object"
)

// How an object's bytes are kept in its row. Part of the on-disk format.
const (
	encRaw   = 0 // as is: zstd did not make it smaller
	encZstd  = 1 // one zstd frame
	encDelta = 2 // one zstd frame whose raw dictionary is the base object's bytes
)

// maxDeltaDepth bounds delta chains, so reading an object costs at most this
// many extra rows.
const maxDeltaDepth = 4

// deltaDictID is the dictionary ID written into delta frames.
const deltaDictID = 1

// deltaWindow is a delta encoder's window: its dictionary and its input,
// each one object (a chunk, at most a small file's 128 KiB), fit in it.
// zstd's default, 8 MiB, made every new encoder allocate and fault in 8
// MiB of history; a pool emptied by a garbage collection then cost a
// Workspace's next commit 3-6 ms.
const deltaWindow = 256 << 10

// codec compresses objects. Its encoder and decoder are safe for concurrent
// use; delta frames need a dictionary each, so they get their own.
type codec struct {
	enc       *zstd.Encoder // file content
	fast      *zstd.Encoder // extent nodes: small, rewritten on every edit
	dec       *zstd.Decoder
	deltas    sync.Pool // *zstd.Encoder, re-armed with a new dictionary per use
	deltaDecs sync.Pool // *zstd.Decoder, likewise
}

func newCodec() (*codec, error) {
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedDefault),
		zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
		zstd.WithEncoderCRC(false),
		zstd.WithZeroFrames(true))
	if err != nil {
		return nil, fmt.Errorf("zstd encoder: %w", err)
	}
	fast, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
		zstd.WithEncoderCRC(false),
		zstd.WithZeroFrames(true))
	if err != nil {
		return nil, fmt.Errorf("zstd encoder: %w", err)
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)))
	if err != nil {
		return nil, fmt.Errorf("zstd decoder: %w", err)
	}
	return &codec{enc: enc, fast: fast, dec: dec}, nil
}

// worthIt reports whether a compressed form saves enough to pay for
// decompressing it on every read.
func worthIt(compressed, raw int) bool { return compressed < raw-raw/32 }

// compress returns the smaller of raw and its zstd frame, with its
// encoding, for an object of kind k. Extent nodes get the fastest level.
// Trees, commits and layers are kept raw: they are small, written on
// every commit, and mostly 32-byte IDs, which do not compress — zstd
// saved ~30% of a tree node for 20-50 µs each, most of a small commit's
// budget. (Large directories are cut into nodes of ~2 KB; see
// tree_nodes.go.)
func (c *codec) compress(raw []byte, k object.Kind) (int, []byte) {
	if len(raw) < 64 || k == object.KindTree || k == object.KindCommit || k == object.KindLayer {
		return encRaw, raw
	}
	enc := c.enc
	if k != object.KindChunk {
		enc = c.fast
	} else if looksRandom(raw) {
		return encRaw, raw
	}
	z := enc.EncodeAll(raw, make([]byte, 0, len(raw)/2))
	if !worthIt(len(z), len(raw)) {
		return encRaw, raw
	}
	return encZstd, z
}

// Sampling for looksRandom: sampleRuns runs of sampleRun bytes spread
// over the object, and the effective alphabet (see looksRandom) from which
// a sample counts as random. Uniformly random bytes give ~241 of 256; text
// 20–40; machine code 60–150.
const (
	sampleRuns    = 8
	sampleRun     = 512
	randomSymbols = 200
)

// looksRandom reports whether file content is, by a sample of its bytes,
// already compressed or encrypted: zstd would spend ~50 µs per 16 KiB
// chunk at its default level to find nothing to save (a 32 MiB capture
// spent ~100 ms so). The measure is the sample's effective alphabet —
// n²/Σcount², the number of equally likely symbols with the same
// collision chance — which costs a histogram, no logarithms. It sees
// order-0 statistics only: content made of repeats of a random run
// shorter than a chunk would compress and is stored raw; repeats longer
// than a chunk are shared by chunking instead.
func looksRandom(raw []byte) bool {
	if len(raw) < sampleRuns*sampleRun*2 {
		return false
	}
	var h [256]uint32
	step := len(raw) / sampleRuns
	for i := range sampleRuns {
		for _, b := range raw[i*step : i*step+sampleRun] {
			h[b]++
		}
	}
	var sq uint64
	for _, n := range h {
		sq += uint64(n) * uint64(n)
	}
	const n = sampleRuns * sampleRun
	return n*n >= randomSymbols*sq
}

// delta compresses raw with base as a raw dictionary. Encoders are pooled:
// building one costs more than a small delta saves. They work at the
// fastest level: re-arming an encoder with a new dictionary is most of a
// delta's cost, and the fastest level's tables are the smallest. For a
// 16 KiB chunk and its version with 10 bytes overwritten, 126 µs against
// 453 µs at the default level, both 35 bytes; with a line inserted into
// Go source, 128 µs and 144 bytes against 415 µs and 114 bytes.
func (c *codec) delta(raw, base []byte) ([]byte, error) {
	dict := zstd.WithEncoderDictRaw(deltaDictID, base)
	enc, _ := c.deltas.Get().(*zstd.Encoder)
	var err error
	if enc == nil {
		enc, err = zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithEncoderConcurrency(1),
			zstd.WithWindowSize(deltaWindow),
			zstd.WithEncoderCRC(false),
			zstd.WithZeroFrames(true),
			dict)
	} else {
		err = enc.ResetWithOptions(nil, dict)
	}
	if err != nil {
		return nil, err
	}
	defer c.deltas.Put(enc)
	return enc.EncodeAll(raw, nil), nil
}

func (c *codec) decode(enc int, data, base []byte, size int) ([]byte, error) {
	switch enc {
	case encRaw:
		return data, nil
	case encZstd:
		return c.dec.DecodeAll(data, make([]byte, 0, size))
	case encDelta:
		// Decoders are pooled and re-armed with each delta's base: a new
		// one per delta cost 19 µs against 8 µs for a 16 KiB chunk.
		dict := zstd.WithDecoderDictRaw(deltaDictID, base)
		dec, _ := c.deltaDecs.Get().(*zstd.Decoder)
		var err error
		if dec == nil {
			dec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), dict)
		} else {
			err = dec.ResetWithOptions(nil, dict)
		}
		if err != nil {
			return nil, err
		}
		defer c.deltaDecs.Put(dec)
		return dec.DecodeAll(data, make([]byte, 0, size))
	}
	return nil, fmt.Errorf("unknown encoding %d", enc)
}
