package objstore

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"iter"
	"strings"
	"time"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// FileInfo is one listed file, or (Dir set) a folder the listing did not
// enter because SkipDir said so.
type FileInfo struct {
	Path    string // full location, in the spelling of the listed prefix
	Size    int64
	ModTime time.Time
	Dir     bool
}

// ListOptions tune one listing.
type ListOptions struct {
	// SkipDir, if set, is asked about every folder below the prefix
	// (given as a full location without the trailing slash); when it
	// returns true the folder is not listed and a FileInfo with Dir set is
	// yielded for it instead. Stores without folders may ignore it: the
	// planner filters every path anyway.
	SkipDir func(dir string) bool
	// Concurrency bounds parallel listing requests, where the store can
	// list in parallel.
	Concurrency int
}

// Store lists and deletes the files of a table location. Implementations:
// S3Store (aws-sdk-go-v2) and IOStore (iceberg-go's IO: local disk and
// other object stores).
type Store interface {
	// List yields every file under prefix, recursively, in any order. An
	// error ends the listing: the planner then deletes nothing.
	List(ctx context.Context, prefix string, opts ListOptions) iter.Seq2[FileInfo, error]
	// Delete removes paths (at most MaxDeleteBatch, all under one prefix)
	// and reports which were removed and which failed. A file that is
	// already gone counts as removed.
	Delete(ctx context.Context, paths []string) (deleted []string, failed map[string]error)
}

// IOStore lists and deletes through an iceberg-go IO that implements
// io.ListableIO (local disk, and the gocloud blob stores).
type IOStore struct {
	FS iceio.IO
}

// List walks prefix with the IO's WalkDir. A missing prefix lists nothing.
func (s IOStore) List(ctx context.Context, prefix string, opts ListOptions) iter.Seq2[FileInfo, error] {
	return func(yield func(FileInfo, error) bool) {
		lfs, ok := s.FS.(iceio.ListableIO)
		if !ok {
			yield(FileInfo{}, fmt.Errorf("the table IO %T cannot list files", s.FS))
			return
		}
		stopped := errors.New("stopped")
		root := ""
		err := lfs.WalkDir(prefix, func(p string, d iofs.DirEntry, err error) error {
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			if root == "" {
				root = p
				if err != nil && errors.Is(err, iofs.ErrNotExist) {
					return iofs.SkipAll
				}
			}
			if err != nil {
				return fmt.Errorf("list %s: %w", p, err)
			}
			if d.IsDir() {
				if p != root && opts.SkipDir != nil && opts.SkipDir(strings.TrimSuffix(p, "/")) {
					if !yield(FileInfo{Path: strings.TrimSuffix(p, "/"), Dir: true}, nil) {
						return stopped
					}
					return iofs.SkipDir
				}
				return nil
			}
			if t := d.Type(); t != 0 && t&iofs.ModeSymlink == 0 {
				return nil // sockets, devices: not table files
			}
			info, err := d.Info()
			if err != nil {
				if errors.Is(err, iofs.ErrNotExist) {
					return nil // removed while listing
				}
				return fmt.Errorf("stat %s: %w", p, err)
			}
			if info.IsDir() {
				return nil
			}
			if !yield(FileInfo{Path: p, Size: info.Size(), ModTime: info.ModTime()}, nil) {
				return stopped
			}
			return nil
		})
		if err != nil && !errors.Is(err, stopped) {
			yield(FileInfo{}, err)
		}
	}
}

// Delete removes paths one by one with the IO's Remove; once ctx is done
// the rest fail with its error.
func (s IOStore) Delete(ctx context.Context, paths []string) ([]string, map[string]error) {
	failed := map[string]error{}
	deleted := make([]string, 0, len(paths))
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			failed[p] = err
			continue
		}
		if err := s.FS.Remove(p); err != nil && !errors.Is(err, iofs.ErrNotExist) {
			failed[p] = err
			continue
		}
		deleted = append(deleted, p)
	}
	return deleted, failed
}

// NewStore returns the store for a table's location: an S3Store for s3://,
// s3a:// and s3n:// locations, an IOStore over the table's iceberg-go IO
// otherwise. The S3 client starts from base, the settings start-up built
// from the catalog properties, with the table's s3.* properties filling in
// what they leave out (S3.ForTable): the AWS environment is not read again.
// Without base (start-up built none: no catalog property names S3), the
// settings are built here from props, the catalog properties, and the
// table's, over the ambient transport of ctx (see S3Settings).
func NewStore(ctx context.Context, tbl *table.Table, base S3, props map[string]string) (Store, error) {
	scheme, _, _ := strings.Cut(tbl.Location(), "://")
	if isS3Scheme(strings.ToLower(scheme)) {
		if base.TableIO {
			if c, ok := tableIOClient(ctx, tbl); ok {
				return NewS3Store(c), nil
			}
		}
		var s S3
		var err error
		if base.Built() {
			s, err = base.ForTable(tbl.Properties())
		} else {
			s, err = S3Settings(ctx, nil, TableProps(props, tbl.Properties()))
		}
		if err != nil {
			return nil, fmt.Errorf("S3 client for %s: %w", tbl.Location(), err)
		}
		return NewS3Store(s.Client()), nil
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("open table IO: %w", err)
	}
	return IOStore{FS: fs}, nil
}

// tableIOClient returns the S3 client of the table's iceberg-go IO when that
// IO is gocloud's S3 bucket (which hands out its client through As).
func tableIOClient(ctx context.Context, tbl *table.Table) (*s3.Client, bool) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, false // the caller's own settings then say why
	}
	b, ok := fs.(interface{ As(any) bool })
	var c *s3.Client
	if !ok || !b.As(&c) || c == nil {
		return nil, false
	}
	return c, true
}
