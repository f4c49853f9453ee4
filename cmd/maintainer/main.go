// Command maintainer keeps Apache Iceberg tables healthy: it compacts small
// files, expires snapshots and removes orphan files.
//
// Wiring, one hop each: cli.go loads the config (package config, whose
// tasks.go decodes each task block onto its component's Config) and builds a
// maintenance.Runner from the catalog, the lease backend (services.go) and
// the trigger state; maintenance.Tasks (maintenance/tasks.go) is the ordered
// list of tasks, each run by its adapter (maintenance/compact_task.go,
// expire_task.go, orphans_task.go) over its package (maintenance/compact,
// maintenance/expire, maintenance/orphans). serve.go runs the
// maintenance.Scheduler, and queue.go joins it to the HTTP server (package
// server). runtime.go sets the memory limits and the Parquet writers'
// allocator handed to compaction.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	// Time zones of trigger windows and current_date('zone') must load in
	// images without /usr/share/zoneinfo (scratch).
	_ "time/tzdata"

	// Catalogs and file systems iceberg-go can reach, registered by import.
	_ "github.com/apache/iceberg-go/catalog/glue"
	_ "github.com/apache/iceberg-go/catalog/hadoop"
	_ "github.com/apache/iceberg-go/catalog/hive"
	_ "github.com/apache/iceberg-go/catalog/rest"
	_ "github.com/apache/iceberg-go/catalog/sql"
	_ "github.com/apache/iceberg-go/io/gocloud/azure"
	_ "github.com/apache/iceberg-go/io/gocloud/gcs"
	_ "github.com/apache/iceberg-go/io/gocloud/s3"
	_ "github.com/jackc/pgx/v5/stdlib" // "pgx" driver for SQL catalogs on PostgreSQL
	_ "github.com/uptrace/bun/driver/sqliteshim"

	"github.com/iceberg-maintainer/maintainer/internal/pqzstd"
)

func main() {
	limit := tuneRuntime(cgroupMemoryFiles)
	if err := pqzstd.Register(); err != nil {
		// Only slower: arrow-go's own codec stays.
		fmt.Fprintln(os.Stderr, "warning: keep arrow-go's zstd codec:", err)
	}
	writeAlloc, err := writeBuffers(os.Getenv, limit)
	if err != nil {
		os.Exit(exitCode(usageError{err}, os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, os.Args[1:], os.Stdout, os.Stderr, writeAlloc)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// Exit codes of the contract (DESIGN.md section 7).
const (
	exitOK          = 0
	exitTaskFailed  = 1
	exitUsage       = 2
	exitUnavailable = 3
)

// usageError is bad usage or configuration: nothing ran.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// unavailableError is a dependency that could not be reached before any work.
type unavailableError struct{ err error }

func (e unavailableError) Error() string { return e.err.Error() }
func (e unavailableError) Unwrap() error { return e.err }

// errTasksFailed is returned after output was printed when some task failed.
var errTasksFailed = errors.New("some maintenance tasks failed")

func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	var ue usageError
	var de unavailableError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, "error:", err)
		return exitUsage
	case errors.As(err, &de):
		fmt.Fprintln(stderr, "error:", err)
		return exitUnavailable
	case errors.Is(err, errTasksFailed):
		return exitTaskFailed
	default:
		fmt.Fprintln(stderr, "error:", err)
		return exitTaskFailed
	}
}
