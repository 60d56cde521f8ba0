package object

import (
	"encoding/binary"
	"errors"
)

// ErrCorrupt says canonical bytes do not decode. Decoders wrap it with the
// kind and ID they were reading.
var ErrCorrupt = errors.New("corrupt object")

// Encoder appends canonical fields to a byte slice.
type Encoder struct{ B []byte }

func (e *Encoder) Uvarint(v uint64) { e.B = binary.AppendUvarint(e.B, v) }
func (e *Encoder) Varint(v int64)   { e.B = binary.AppendVarint(e.B, v) }
func (e *Encoder) Byte(b byte)      { e.B = append(e.B, b) }
func (e *Encoder) ID(id ID)         { e.B = append(e.B, id[:]...) }

// Bytes writes a length-prefixed byte string.
func (e *Encoder) Bytes(b []byte) {
	e.Uvarint(uint64(len(b)))
	e.B = append(e.B, b...)
}

func (e *Encoder) String(s string) {
	e.Uvarint(uint64(len(s)))
	e.B = append(e.B, s...)
}

// Decoder reads canonical fields; the first error sticks and later reads
// return zero values, so a decoder checks Err once at the end.
type Decoder struct {
	B   []byte
	err error
}

func (d *Decoder) fail() { d.err = ErrCorrupt; d.B = nil }

func (d *Decoder) Err() error { return d.err }

// Done reports an error unless every byte was consumed.
func (d *Decoder) Done() error {
	if d.err == nil && len(d.B) != 0 {
		d.err = ErrCorrupt
	}
	return d.err
}

func (d *Decoder) Uvarint() uint64 {
	v, n := binary.Uvarint(d.B)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.B = d.B[n:]
	return v
}

func (d *Decoder) Varint() int64 {
	v, n := binary.Varint(d.B)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.B = d.B[n:]
	return v
}

func (d *Decoder) Byte() byte {
	if len(d.B) < 1 {
		d.fail()
		return 0
	}
	b := d.B[0]
	d.B = d.B[1:]
	return b
}

func (d *Decoder) ID() ID {
	var id ID
	if len(d.B) < Size {
		d.fail()
		return id
	}
	copy(id[:], d.B)
	d.B = d.B[Size:]
	return id
}

// Bytes reads a length-prefixed byte string; the result aliases the input.
func (d *Decoder) Bytes() []byte {
	n := d.Uvarint()
	if d.err != nil || n > uint64(len(d.B)) {
		d.fail()
		return nil
	}
	b := d.B[:n]
	d.B = d.B[n:]
	return b
}

func (d *Decoder) String() string { return string(d.Bytes()) }
