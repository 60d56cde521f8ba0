package layerfs

// Each call below is one atomic Commit on the FS's branch: it returns
// Committed with the new commit, UpToDate when nothing changed, or Conflict
// naming the paths that changed on the branch since the call's base. Bad
// input is an error and leaves the branch as it was.

// Write creates or replaces a file.
func (f *FS) Write(p string, data []byte, call ...Call) (*Result, error) {
	return f.Batch(func(b *Batch) error { return b.Write(p, data) }, call...)
}

// WriteAt writes data at offset off of an existing file.
func (f *FS) WriteAt(p string, off int64, data []byte, call ...Call) (*Result, error) {
	return f.Batch(func(b *Batch) error { return b.WriteAt(p, off, data) }, call...)
}

// Append adds data at the end of a file, creating it if missing.
func (f *FS) Append(p string, data []byte, call ...Call) (*Result, error) {
	return f.Batch(func(b *Batch) error { return b.Append(p, data) }, call...)
}

// Truncate sets a file's size.
func (f *FS) Truncate(p string, size int64, call ...Call) (*Result, error) {
	return f.Batch(func(b *Batch) error { return b.Truncate(p, size) }, call...)
}

// Edit replaces old with new in a text file; old must occur exactly once
// unless all is set.
func (f *FS) Edit(p, old, new string, all bool, call ...Call) (*Result, error) {
	return f.Batch(func(b *Batch) error { return b.Edit(p, old, new, all) }, call...)
}

// Delete removes a file, symlink or directory tree.
func (f *FS) Delete(p string, call ...Call) (*Result, error) {
	return f.Batch(func(b *Batch) error { return b.Delete(p) }, call...)
}

// Move renames a path; the target must not exist.
func (f *FS) Move(from, to string, call ...Call) (*Result, error) {
	return f.Batch(func(b *Batch) error { return b.Move(from, to) }, call...)
}

// Mkdir creates a directory and its missing parents.
func (f *FS) Mkdir(p string, call ...Call) (*Result, error) {
	return f.Batch(func(b *Batch) error { return b.Mkdir(p) }, call...)
}

// Symlink creates a symbolic link.
func (f *FS) Symlink(p, target string, call ...Call) (*Result, error) {
	return f.Batch(func(b *Batch) error { return b.Symlink(p, target) }, call...)
}

// Chmod sets permission bits.
func (f *FS) Chmod(p string, mode uint32, call ...Call) (*Result, error) {
	return f.Batch(func(b *Batch) error { return b.Chmod(p, mode) }, call...)
}
