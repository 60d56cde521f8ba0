package extents

import (
	"bytes"
	"errors"
	"testing"

	"github.com/layerfs/layerfs/object"
)

func testNode(level, count int) Node {
	n := Node{Level: level}
	for i := range count {
		n.Entries = append(n.Entries, Entry{Len: int64(1 + i*1000), ID: object.Sum(object.KindChunk, []byte{byte(i)})})
	}
	return n
}

func TestNodeRoundTrip(t *testing.T) {
	for _, n := range []Node{testNode(0, 1), testNode(0, 32), testNode(3, MaxFanout), testNode(MaxLevel, 2)} {
		got, err := DecodeNode(n.Encode())
		if err != nil {
			t.Fatalf("decode level %d node of %d entries: %v", n.Level, len(n.Entries), err)
		}
		if got.Level != n.Level || len(got.Entries) != len(n.Entries) || got.Size() != n.Size() {
			t.Fatalf("round trip changed the node")
		}
		for i := range n.Entries {
			if got.Entries[i] != n.Entries[i] {
				t.Fatalf("round trip changed entry %d", i)
			}
		}
	}
}

// TestNodeFormat pins the encoding: a change here breaks every stored file.
func TestNodeFormat(t *testing.T) {
	var id object.ID
	id[0] = 0xab
	got := Node{Level: 1, Entries: []Entry{{Len: 300, ID: id}}}.Encode()
	want := append([]byte{1, 1, 0xac, 0x02}, id[:]...)
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding %x, want %x", got, want)
	}
}

func TestDecodeNodeRejects(t *testing.T) {
	good := testNode(1, 3).Encode()
	leaf := testNode(0, 2).Encode()
	big := Node{Level: 0, Entries: []Entry{{Len: ChunkMax + 1}}}.Encode()
	overflow := Node{Level: 2, Entries: []Entry{{Len: 1 << 62}, {Len: 1 << 62}}}.Encode()
	var id object.ID
	nonMinimal := append([]byte{0, 1, 0x81, 0x00}, id[:]...)
	cases := map[string][]byte{
		"empty":           {},
		"level only":      {0},
		"level too high":  append([]byte{MaxLevel + 1}, good[1:]...),
		"no entries":      {0, 0},
		"too many":        {0, 0x81, 0x08},
		"count above":     append([]byte{1, 4}, good[2:]...),
		"count below":     append([]byte{1, 2}, good[2:]...),
		"truncated":       good[:len(good)-1],
		"trailing":        append(bytes.Clone(good), 0),
		"zero length":     append([]byte{0, 1, 0}, id[:]...),
		"leaf too long":   big,
		"sum overflows":   overflow,
		"non-minimal len": nonMinimal,
		"leaf truncated":  leaf[:40],
	}
	for name, data := range cases {
		if _, err := DecodeNode(data); !errors.Is(err, object.ErrCorrupt) {
			t.Errorf("%s: got %v, want ErrCorrupt", name, err)
		}
	}
}

func FuzzDecodeNode(f *testing.F) {
	f.Add(testNode(0, 3).Encode())
	f.Add(testNode(2, 70).Encode())
	f.Add([]byte{0, 1, 0x80, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := DecodeNode(data)
		if err != nil {
			if !errors.Is(err, object.ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if !bytes.Equal(n.Encode(), data) {
			t.Fatalf("decoded node does not encode to its input")
		}
		if n.Size() <= 0 {
			t.Fatalf("decoded node has size %d", n.Size())
		}
	})
}
