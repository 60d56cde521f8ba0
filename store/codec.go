package store

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
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

// codec compresses objects. Its encoder and decoder are safe for concurrent
// use; delta frames need a dictionary each, so they get their own.
type codec struct {
	enc    *zstd.Encoder // file content
	fast   *zstd.Encoder // trees, nodes, commits: small, rewritten on every commit
	dec    *zstd.Decoder
	deltas sync.Pool // *zstd.Encoder, re-armed with a new dictionary per use
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
// encoding. Metadata (meta) gets the fastest level: it is rewritten on
// every commit, and zstd's default level costs more there than it saves.
func (c *codec) compress(raw []byte, meta bool) (int, []byte) {
	if len(raw) < 64 {
		return encRaw, raw
	}
	enc := c.enc
	if meta {
		enc = c.fast
	}
	z := enc.EncodeAll(raw, make([]byte, 0, len(raw)/2))
	if !worthIt(len(z), len(raw)) {
		return encRaw, raw
	}
	return encZstd, z
}

// delta compresses raw with base as a raw dictionary. Encoders are pooled:
// building one costs more than a small delta saves.
func (c *codec) delta(raw, base []byte) ([]byte, error) {
	dict := zstd.WithEncoderDictRaw(deltaDictID, base)
	enc, _ := c.deltas.Get().(*zstd.Encoder)
	var err error
	if enc == nil {
		enc, err = zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.SpeedDefault),
			zstd.WithEncoderConcurrency(1),
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
		dec, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderDictRaw(deltaDictID, base))
		if err != nil {
			return nil, err
		}
		defer dec.Close()
		return dec.DecodeAll(data, make([]byte, 0, size))
	}
	return nil, fmt.Errorf("unknown encoding %d", enc)
}
