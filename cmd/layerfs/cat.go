package main

import (
	"fmt"
	"io"

	"github.com/layerfs/layerfs/extents"
	"github.com/layerfs/layerfs/store"
)

func init() {
	register(&command{
		name:    "cat",
		args:    "REF:PATH",
		summary: "print a file from a ref's tree",
		run:     runCat,
	})
}

func runCat(c *cli, args []string) error {
	st, ref, path, err := c.fileAt(args)
	if err != nil {
		return err
	}
	s := st.Backend()
	root, _, err := s.CommitRoot(ref)
	if err != nil {
		return err
	}
	e, err := s.Lookup(root, path)
	if err != nil {
		return err
	}
	switch e.Type {
	case store.TypeDir:
		return fmt.Errorf("%w: %s is a directory (layerfs ls %s:%s lists it)", errUsage, path, ref, path)
	case store.TypeSymlink:
		return fmt.Errorf("%w: %s is a symlink to %s, not a file", errUsage, path, e.Target)
	}
	r := extents.NewReader(s, extents.File{ID: e.ID, Size: e.Size})
	_, err = io.Copy(c.out, io.NewSectionReader(r, 0, e.Size))
	return err
}
