package extents

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/layerfs/layerfs/object"
)

// Write stores the content read from r until io.EOF and returns its File.
// It reads a large file once, keeping a chunk at a time in memory.
func Write(s Store, r io.Reader) (File, error) {
	return write(s, r, func(r io.Reader) (File, error) { return writeLarge(s, r) })
}

// write stores a small file read from r as one chunk, and hands a large
// one, whole, to large.
func write(s Store, r io.Reader, large func(io.Reader) (File, error)) (File, error) {
	head, err := io.ReadAll(io.LimitReader(r, SmallFileMax))
	if err != nil {
		return File{}, fmt.Errorf("write file: %w", err)
	}
	if len(head) < SmallFileMax {
		return writeSmall(s, head, object.Zero)
	}
	return large(io.MultiReader(bytes.NewReader(head), r))
}

// WriteBytes stores b and returns its File. The Store may keep b's chunks
// but never b itself, so the caller may reuse b.
func WriteBytes(s Store, b []byte) (File, error) {
	if len(b) < SmallFileMax {
		return writeSmall(s, bytes.Clone(b), object.Zero)
	}
	return writeLarge(s, bytes.NewReader(b))
}

// writeSmall stores data, which the Store may keep, as a one-chunk file.
func writeSmall(s Store, data []byte, base object.ID) (File, error) {
	if data == nil {
		data = []byte{}
	}
	id, err := s.PutChunk(data, base)
	if err != nil {
		return File{}, fmt.Errorf("write file: put chunk: %w", err)
	}
	return File{ID: id, Size: int64(len(data))}, nil
}

// writeLarge chunks r, which holds at least SmallFileMax bytes, and builds
// its tree.
func writeLarge(s Store, r io.Reader) (File, error) {
	var leaves []Entry
	var size int64
	err := cutChunks(r, func(data []byte, _ bool) error {
		id, err := s.PutChunk(bytes.Clone(data), object.Zero)
		if err != nil {
			return fmt.Errorf("put chunk: %w", err)
		}
		leaves = append(leaves, Entry{Len: int64(len(data)), ID: id})
		size += int64(len(data))
		return nil
	})
	if err != nil {
		return File{}, fmt.Errorf("write file: %w", err)
	}
	root, err := buildTree(s, 0, leaves)
	if err != nil {
		return File{}, fmt.Errorf("write file: %w", err)
	}
	return File{ID: root, Size: size}, nil
}

// WriteConcurrent is Write for one large file at a time: it cuts chunks
// on the calling goroutine while a worker per core hashes, compresses and
// stores the chunks cut before, so a file's capture takes about as long
// as cutting it. The result is the File Write makes.
func WriteConcurrent(s Store, r io.Reader) (File, error) {
	return write(s, r, func(r io.Reader) (File, error) {
		w := newChunkWriter(s, runtime.GOMAXPROCS(0))
		err := cutChunks(r, func(data []byte, _ bool) error { return w.put(bytes.Clone(data)) })
		return w.finish(err)
	})
}

// finish waits for the chunks given, then builds the file's tree over
// them; err is the error, if any, that stopped the giving.
func (w *chunkWriter) finish(err error) (File, error) {
	leaves, werr := w.wait()
	if err = cmp.Or(err, werr); err != nil {
		return File{}, fmt.Errorf("write file: %w", err)
	}
	var size int64
	for _, e := range leaves {
		size += e.Len
	}
	root, err := buildTree(w.s, 0, leaves)
	if err != nil {
		return File{}, fmt.Errorf("write file: %w", err)
	}
	return File{ID: root, Size: size}, nil
}

// chunkWriter stores chunks on worker goroutines, a run of up to
// chunkRun at a time, and collects their entries in the order they were
// given.
type chunkWriter struct {
	s      Store
	jobs   chan chunkJob
	run    chunkJob // being collected
	wg     sync.WaitGroup
	mu     sync.Mutex
	leaves []Entry
	err    error
}

// chunkRun is how many chunks a worker stores at once: a ChunkBatcher
// looks them up together.
const chunkRun = 16

type chunkJob struct {
	i    int // the first chunk's index
	data [][]byte
}

func newChunkWriter(s Store, workers int) *chunkWriter {
	w := &chunkWriter{s: s, jobs: make(chan chunkJob, workers)}
	for range workers {
		w.wg.Add(1)
		go w.work()
	}
	return w
}

func (w *chunkWriter) work() {
	defer w.wg.Done()
	for j := range w.jobs {
		ids, err := w.store(j.data)
		w.mu.Lock()
		for k, id := range ids {
			w.leaves[j.i+k].ID = id
		}
		if err != nil && w.err == nil {
			w.err = fmt.Errorf("put chunk: %w", err)
		}
		w.mu.Unlock()
	}
}

func (w *chunkWriter) store(chunks [][]byte) ([]object.ID, error) {
	if b, ok := w.s.(ChunkBatcher); ok {
		return b.PutChunks(chunks)
	}
	ids := make([]object.ID, 0, len(chunks))
	for _, data := range chunks {
		id, err := w.s.PutChunk(data, object.Zero)
		if err != nil {
			return ids, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// put adds a chunk to the run being collected, and queues a full run; it
// fails once a worker has failed.
func (w *chunkWriter) put(data []byte) error {
	w.mu.Lock()
	err := w.err
	if w.run.data == nil {
		w.run.i = len(w.leaves)
	}
	w.leaves = append(w.leaves, Entry{Len: int64(len(data))})
	w.mu.Unlock()
	if err != nil {
		return err
	}
	w.run.data = append(w.run.data, data)
	if len(w.run.data) == chunkRun {
		w.flush()
	}
	return nil
}

func (w *chunkWriter) flush() {
	if len(w.run.data) > 0 {
		w.jobs <- w.run
	}
	w.run = chunkJob{}
}

// wait queues the last run, stops the workers and returns the entries.
func (w *chunkWriter) wait() ([]Entry, error) {
	w.flush()
	close(w.jobs)
	w.wg.Wait()
	return w.leaves, w.err
}
