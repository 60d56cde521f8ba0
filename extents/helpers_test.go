package extents

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"
)

// randBytes returns n pseudo-random bytes from seed.
func randBytes(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24),
		byte(seed >> 32), byte(seed >> 40), byte(seed >> 48), byte(seed >> 56)})
	r.Read(b)
	return b
}

// mixedBytes returns n bytes of random runs, zero runs and repeats of
// earlier runs, the shapes that stress chunking and dedup.
func mixedBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, 0, n)
	for len(b) < n {
		run := min(n-len(b), 1+rng.IntN(200<<10))
		switch k := rng.IntN(8); {
		case k == 0:
			b = append(b, make([]byte, run)...)
		case k == 1 && len(b) > 0:
			from := rng.IntN(len(b))
			run = min(run, len(b)-from)
			b = append(b, b[from:from+run]...)
		default:
			b = append(b, randBytes(rng.Uint64(), run)...)
		}
	}
	return b
}

// readAll reads f whole through a Reader, checking ReadAt's EOF contract.
func readAll(t testing.TB, s Store, f File) []byte {
	t.Helper()
	b := make([]byte, f.Size+1)
	n, err := NewReader(s, f).ReadAt(b, 0)
	if err != io.EOF || int64(n) != f.Size {
		t.Fatalf("read %d-byte file: got %d bytes, %v", f.Size, n, err)
	}
	return b[:n]
}

// checkContent compares f with want: whole, at random ranges, and as the
// canonical File of want.
func checkContent(t testing.TB, s Store, f File, want []byte, rng *rand.Rand) {
	t.Helper()
	if f.Size != int64(len(want)) {
		t.Fatalf("size %d, want %d", f.Size, len(want))
	}
	r := NewReader(s, f)
	for range 20 {
		off := rng.Int64N(int64(len(want)) + 10)
		p := make([]byte, rng.IntN(70<<10))
		n, err := r.ReadAt(p, off)
		wantN := max(0, min(int64(len(p)), int64(len(want))-off))
		if int64(n) != wantN || (n < len(p) && err != io.EOF) || (n == len(p) && err != nil) {
			t.Fatalf("ReadAt(%d bytes, %d) of %d = %d, %v", len(p), off, len(want), n, err)
		}
		if n > 0 && !bytes.Equal(p[:n], want[off:off+int64(n)]) {
			t.Fatalf("ReadAt(%d bytes, %d): content differs", len(p), off)
		}
	}
	if got := readAll(t, s, f); !bytes.Equal(got, want) {
		t.Fatalf("content of %d bytes differs", len(want))
	}
	if canon, err := WriteBytes(s, want); err != nil || canon != f {
		t.Fatalf("file %s/%d is not canonical: WriteBytes gives %s/%d, %v",
			f.ID.Short(), f.Size, canon.ID.Short(), canon.Size, err)
	}
}
