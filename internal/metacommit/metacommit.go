// Package metacommit commits an update to a table on the very metadata it
// was built on: it writes the next metadata file from that base and moves
// the catalog's pointer to it by compare-and-set. iceberg-go's SQL catalog
// commit first loads (and parses) the table again to check the
// requirements on it, and on a large table that parse is a third of an
// attempt: beside a writer that commits every few hundred milliseconds, an
// attempt that takes longer than the writer's period never lands. Here the
// compare-and-set itself is the check (the pointer still names the base, so
// nothing was committed since), and a lost attempt removes the metadata
// file it wrote, which iceberg-go's commit leaves behind.
//
// RemoveDropped does, after any commit the maintainer sends itself, what
// iceberg-go does only after its transactions' commits: remove the metadata
// files the commit dropped from the metadata log, when the table asks for it.
package metacommit

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"path"
	"regexp"
	"strconv"
	"strings"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/klauspost/compress/zstd"

	"github.com/iceberg-maintainer/maintainer/internal/waiting"
)

// Swapper moves a table's catalog pointer from one metadata file to
// another if, and only if, it points at the first (sqlcatalog.Rows). False
// means it did not move; an error leaves the outcome unknown.
type Swapper interface {
	SwapMetadataLocation(ctx context.Context, ident table.Identifier, from, to string) (bool, error)
}

// ErrNotSent: the commit stopped before its compare-and-set was sent (its
// context ended: a lost lease, a shutdown), so it certainly did not land;
// the metadata file it wrote is removed.
var ErrNotSent = errors.New("stopped before the compare-and-set was sent, nothing committed")

// ErrUnnumbered: the base's metadata file is not named with a version, so
// the next file's name cannot follow it; the caller commits through the
// catalog instead. Nothing was written.
var ErrUnnumbered = errors.New("the metadata file is not named <version>-<uuid>.metadata.json")

// numbered is the name iceberg-go and Java give a metadata file, with an
// optional codec (00012-<uuid>.gz.metadata.json); legacy v<N> names too.
var (
	numbered = regexp.MustCompile(`^(\d+)-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?:\.\w+)?\.metadata\.json$`)
	legacy   = regexp.MustCompile(`^v(\d+)(?:\.gz)?\.metadata\.json$`)
)

// Version is the version in a metadata file's name, or -1.
func Version(location string) int {
	name := path.Base(location)
	m := numbered.FindStringSubmatch(name)
	if m == nil {
		m = legacy.FindStringSubmatch(name)
	}
	if m == nil {
		return -1
	}
	v, err := strconv.Atoi(m[1])
	if err != nil {
		return -1
	}
	return v
}

// Commit applies updates to base's metadata, writes the result as the
// table's next metadata file and swaps the catalog's pointer from base's
// file to it. The requirements are checked on base: the swap guarantees the
// table is still at base when it lands. A refused swap or requirement is a
// conflict (it wraps table.ErrCommitFailed, and nothing it wrote is left);
// any other failure after the write may have landed, and its file is kept.
func Commit(ctx context.Context, sw Swapper, base *table.Table, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	ident, from := base.Identifier(), base.MetadataLocation()
	name := strings.Join(ident, ".")
	version := Version(from)
	if version < 0 {
		return nil, "", fmt.Errorf("commit to table %s on %s: %w", name, from, ErrUnnumbered)
	}
	for _, r := range reqs {
		if err := r.Validate(base.Metadata()); err != nil {
			return nil, "", fmt.Errorf("commit to table %s: %w: %w", name, table.ErrCommitFailed, err)
		}
	}
	meta, err := table.UpdateTableMetadata(base.Metadata(), updates, from)
	if err != nil {
		return nil, "", fmt.Errorf("commit to table %s: apply the updates to %s: %w", name, from, err)
	}
	loc, err := nextLocation(meta, version+1)
	if err != nil {
		return nil, "", fmt.Errorf("commit to table %s: name the next metadata file: %w", name, err)
	}
	fsys, err := base.FS(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("commit to table %s: file IO: %w", name, err)
	}
	wfs, ok := fsys.(iceio.WriteFileIO)
	if !ok {
		return nil, "", fmt.Errorf("commit to table %s: its file IO cannot write", name)
	}
	codec := meta.Properties().Get(table.MetadataCompressionKey, table.MetadataCompressionDefault)
	if err := write(wfs, loc, codec, meta); err != nil {
		// A partial file is no commit's: remove what there is.
		_ = wfs.Remove(loc)
		return nil, "", fmt.Errorf("commit to table %s: write metadata file %s: %w", name, loc, err)
	}
	if ctx.Err() != nil {
		// The write may have taken a while; a lease lost meanwhile stops
		// the commit here, not after it.
		_ = wfs.Remove(loc)
		return nil, "", fmt.Errorf("commit to table %s: %w: %w", name, ErrNotSent, context.Cause(ctx))
	}
	swapped, err := swap(ctx, sw, ident, from, loc)
	if err != nil {
		return nil, "", fmt.Errorf("commit to table %s, outcome unknown (it may have landed): %w", name, err)
	}
	if !swapped {
		err := fmt.Errorf("commit to table %s: %w: the catalog no longer points at %s", name, table.ErrCommitFailed, from)
		if rerr := wfs.Remove(loc); rerr != nil {
			// Unreferenced either way: orphan removal collects it.
			return nil, "", fmt.Errorf("%w (and removing its metadata file %s failed: %v)", err, loc, rerr)
		}
		return nil, "", err
	}
	return meta, loc, nil
}

func swap(ctx context.Context, sw Swapper, ident table.Identifier, from, to string) (bool, error) {
	defer waiting.Begin(ctx, "catalog: commit table")()
	return sw.SwapMetadataLocation(ctx, ident, from, to)
}

// nextLocation names the metadata file of the given version where the
// table's location provider puts them (write.metadata.path), with the
// codec's extension, as iceberg-go's catalogs do.
func nextLocation(meta table.Metadata, version int) (string, error) {
	provider, err := table.LoadLocationProvider(meta.Location(), meta.Properties())
	if err != nil {
		return "", err
	}
	return provider.NewTableMetadataFileLocation(version)
}

// write writes meta as JSON to loc, compressed by codec
// (write.metadata.compression-codec).
func write(fs iceio.WriteFileIO, loc, codec string, meta table.Metadata) (err error) {
	switch codec {
	case table.MetadataCompressionCodecNone, table.MetadataCompressionCodecGzip, table.MetadataCompressionCodecZstd:
	default:
		return fmt.Errorf("unsupported metadata compression codec %q (%s)", codec, table.MetadataCompressionKey)
	}
	out, err := fs.Create(loc)
	if err != nil {
		return err
	}
	defer closeInto(out, &err)
	var w io.Writer = out
	switch codec {
	case table.MetadataCompressionCodecGzip:
		gz := gzip.NewWriter(out)
		defer closeInto(gz, &err)
		w = gz
	case table.MetadataCompressionCodecZstd:
		enc, zerr := zstd.NewWriter(out)
		if zerr != nil {
			return zerr
		}
		defer closeInto(enc, &err)
		w = enc
	}
	return json.NewEncoder(w).Encode(meta)
}

// closeInto closes c and keeps its error when there was none before: a
// file whose close failed may not hold what was written.
func closeInto(c io.Closer, err *error) {
	if cerr := c.Close(); cerr != nil && *err == nil {
		*err = cerr
	}
}

// RemoveDropped removes the metadata files a commit dropped from the
// table's metadata log (those in base's log that committed's lacks), when
// committed asks for it (write.metadata.delete-after-commit.enabled), as
// Iceberg's commits do: such a file is no version of the table any more.
// The catalog's own commits do it only through iceberg-go's transactions,
// so each commit the maintainer sends itself calls this once it landed. It
// stops when ctx ends (a lost lease deletes nothing more). A file already
// gone is no failure; the other failures are logged, and the files stay
// for orphan removal. It returns how many files it removed.
func RemoveDropped(ctx context.Context, fs iceio.IO, base, committed table.Metadata, log *slog.Logger) int {
	if base == nil || committed == nil ||
		!committed.Properties().GetBool(table.MetadataDeleteAfterCommitEnabledKey, table.MetadataDeleteAfterCommitEnabledDefault) {
		return 0
	}
	kept := map[string]bool{}
	for e := range committed.PreviousFiles() {
		kept[e.MetadataFile] = true
	}
	var errs []error
	removed := 0
	for e := range base.PreviousFiles() {
		if kept[e.MetadataFile] {
			continue
		}
		if err := ctx.Err(); err != nil {
			errs = append(errs, fmt.Errorf("stopped before removing %s: %w", e.MetadataFile, context.Cause(ctx)))
			break
		}
		switch err := fs.Remove(e.MetadataFile); {
		case err == nil:
			removed++
		case !errors.Is(err, iofs.ErrNotExist):
			errs = append(errs, fmt.Errorf("remove metadata file %s: %w", e.MetadataFile, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		log.Warn("metadata files the commit dropped from the metadata log were not all removed; the orphan pass will",
			"removed", removed, "err", err)
	}
	return removed
}
