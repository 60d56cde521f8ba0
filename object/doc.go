// Package object names LayerFS's immutable values.
//
// Every stored value — a chunk of file bytes, an extent node, a tree, a
// commit, a layer — is an Object. Its ID is the BLAKE3-256 digest of one
// type tag byte followed by the object's canonical encoding, so two objects
// of different kinds never share an ID even when their bytes are equal, and
// identical content is always named (and stored) once.
//
// This package is the leaf every other package agrees on: it holds the ID
// type, the kinds, the hash, and the small varint helpers the canonical
// encodings are written with. It knows nothing of where objects live.
package object
