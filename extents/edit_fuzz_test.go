package extents

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// fuzzSize maps a fuzz byte pair to a starting size: small, at the
// threshold, or up to 2 MiB.
func fuzzSize(kind byte, v uint16) int {
	switch kind % 4 {
	case 0:
		return int(v) % SmallFileMax
	case 1:
		return SmallFileMax - 2048 + int(v)%4096
	case 2:
		return SmallFileMax + int(v)*14
	}
	return int(v) * 32
}

// fuzzOp is one edit decoded from 8 fuzz bytes: kind, offset fraction,
// length, data seed.
type fuzzOp struct {
	kind byte
	off  uint32 // fraction of size+64 KiB, in 1/2^24
	n    uint16
	seed byte
}

func decodeFuzzOps(b []byte) []fuzzOp {
	var ops []fuzzOp
	for len(b) >= 8 && len(ops) < 8 {
		ops = append(ops, fuzzOp{kind: b[0], off: binary.LittleEndian.Uint32(b[1:5]) & (1<<24 - 1), n: binary.LittleEndian.Uint16(b[5:7]), seed: b[7]})
		b = b[8:]
	}
	return ops
}

func (op fuzzOp) apply(t *testing.T, s Store, f File, m []byte) (File, []byte) {
	size := int64(len(m))
	off := int64(op.off) * (size + 64<<10) >> 24
	n := int(op.n)%(4<<10) + 1
	if op.kind&4 != 0 {
		n = int(op.n)*8 + 1
	}
	data := randBytes(uint64(op.seed), n)
	if op.kind&8 != 0 {
		data = make([]byte, n)
	}
	var err error
	switch op.kind % 4 {
	case 0, 1:
		f, err = Overwrite(s, f, off, data)
		m = modelOverwrite(m, off, data)
	case 2:
		f, err = Append(s, f, data)
		m = append(m, data...)
	case 3:
		if op.kind&16 != 0 {
			off = size - int64(op.n)
		}
		off = max(0, off)
		f, err = Truncate(s, f, off)
		m = modelTruncate(m, off)
	}
	if err != nil {
		t.Fatalf("%+v: %v", op, err)
	}
	return f, m
}

// FuzzEdits applies up to 8 edits decoded from the input to a file and to a
// byte slice, and checks content and canonical form after each. A first
// byte with its top bit set uses a node rule of fan-out 2 to 4 for deep trees.
func FuzzEdits(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0})
	f.Add([]byte{2, 0xff, 0x0f, 0, 0, 0x80, 0, 0, 0x10, 0x10, 3, 0, 0, 0x80, 0, 0, 0x80, 1})
	f.Add([]byte{1, 0x10, 0x30, 19, 0, 0, 0x80, 0x40, 0, 7, 5, 0, 0, 0, 0x20, 0, 9, 2, 0xff, 0xff, 0xff, 0, 0, 1, 3})
	f.Add([]byte{0x82, 0x10, 0x40, 0, 0x10, 0, 0, 0, 0x40, 0, 3, 0x10, 0, 0, 0, 0x40, 0, 0, 0x11, 0, 0, 0x80, 0, 0, 0x30, 0})
	f.Add([]byte{3, 0xff, 0xff, 4, 0x33, 0x33, 0x33, 0, 0x20, 0x20, 6, 0xc, 0, 0, 0x80, 0, 0x40, 0, 8, 0x13, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 3 {
			return
		}
		if b[0]&0x80 != 0 {
			saved := nodeRule
			nodeRule.bits, nodeRule.min, nodeRule.max = 1, 2, 4
			defer func() { nodeRule = saved }()
		}
		size := fuzzSize(b[0], binary.LittleEndian.Uint16(b[1:3]))
		s := NewTestStore(t)
		rng := rand.New(rand.NewPCG(uint64(size), 1))
		m := mixedBytes(rng, size)
		file := MustWrite(t, s, m)
		for _, op := range decodeFuzzOps(b[3:]) {
			file, m = op.apply(t, s, file, m)
			checkContent(t, s, file, m, rng)
		}
		if err := Check(s, file); err != nil {
			t.Fatal(err)
		}
	})
}
