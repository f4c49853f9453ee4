package orphans

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/apache/iceberg-go/table"
)

// TableLister is the part of an iceberg-go catalog that
// CatalogTableLocations needs.
type TableLister interface {
	ListNamespaces(ctx context.Context, parent table.Identifier) ([]table.Identifier, error)
	ListTables(ctx context.Context, namespace table.Identifier) iter.Seq2[table.Identifier, error]
	LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error)
}

// CatalogTableLocations returns the locations of every table of the
// catalog except self, walking nested namespaces, for PlanTable's shared
// location check. Any error is returned: a table whose location is unknown
// could live under the one being cleaned.
func CatalogTableLocations(ctx context.Context, cat TableLister, self table.Identifier) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	var walk func(parent table.Identifier) error
	walk = func(parent table.Identifier) error {
		nss, err := cat.ListNamespaces(ctx, parent)
		if err != nil {
			return fmt.Errorf("list namespaces of %q: %w", strings.Join(parent, "."), err)
		}
		for _, ns := range nss {
			key := strings.Join(ns, "\x00")
			if seen[key] || len(ns) <= len(parent) {
				continue
			}
			seen[key] = true
			for ident, err := range cat.ListTables(ctx, ns) {
				if err != nil {
					return fmt.Errorf("list tables of %s: %w", strings.Join(ns, "."), err)
				}
				if slices.Equal(ident, self) {
					continue
				}
				t, err := cat.LoadTable(ctx, ident)
				if err != nil {
					return fmt.Errorf("load table %s: %w", strings.Join(ident, "."), err)
				}
				out = append(out, t.Metadata().Location())
			}
			if err := walk(ns); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(nil); err != nil {
		return nil, err
	}
	return out, nil
}
