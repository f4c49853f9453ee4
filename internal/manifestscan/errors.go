package manifestscan

import (
	"errors"
	"fmt"
)

// What went wrong, for errors.Is. Every error this package returns (but
// those of the caller's callbacks) is an *Error naming the file, and wraps
// one of these or the table IO's own error (a failed open or read).
var (
	// ErrMissing: the file does not exist. It also matches fs.ErrNotExist
	// when the opener reported it so.
	ErrMissing = errors.New("file is missing")
	// ErrBadMagic: the file is not an Avro object container file.
	ErrBadMagic = errors.New("not an Avro container file (bad magic)")
	// ErrTruncated: the file ends early (in the header, inside a block, or
	// before the length its manifest list records).
	ErrTruncated = errors.New("truncated")
	// ErrUnknownCodec: the blocks use a codec other than null, deflate,
	// snappy and zstandard.
	ErrUnknownCodec = errors.New("unknown codec")
	// ErrMissingField: the writer schema lacks a field the caller requires.
	ErrMissingField = errors.New("missing required field")
	// ErrBadSchema: the writer schema cannot be parsed, or a wanted field
	// has a type the field cannot have.
	ErrBadSchema = errors.New("bad schema")
	// ErrCorrupt: the data does not match its schema or container framing
	// (sync marker, block sizes, bytes left over, values out of range).
	ErrCorrupt = errors.New("corrupt")
)

// Error is a failure to read one file.
type Error struct {
	What string // "manifest list" or "manifest"
	Path string
	Err  error // wraps one of the sentinels above, or the IO's error
}

func (e *Error) Error() string { return fmt.Sprintf("read %s %s: %v", e.What, e.Path, e.Err) }

func (e *Error) Unwrap() error { return e.Err }
