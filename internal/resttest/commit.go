package resttest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
)

// commitTable is updateTable: POST .../tables/{table} with a
// CommitTableRequest.
func (s *Server) commitTable(w http.ResponseWriter, r *http.Request, endpoint string) {
	ident := tableIdent(r)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.fail(w, endpoint, http.StatusBadRequest, "BadRequestException", "read the request: "+err.Error())
		return
	}
	// The spec: "Server implementations are required to fail with a 400
	// status code if any unknown updates or requirements are received."
	if problems := check(body, (*checker).commitTableRequest); len(problems) > 0 {
		s.violation(endpoint, "request breaks the spec: %s", strings.Join(problems, "; "))
		s.fail(w, endpoint, http.StatusBadRequest, "BadRequestException", strings.Join(problems, "; "))
		return
	}
	var raw struct {
		Identifier *struct {
			Namespace []string `json:"namespace"`
			Name      string   `json:"name"`
		} `json:"identifier"`
		Requirements []map[string]any `json:"requirements"`
	}
	var typed struct {
		Requirements table.Requirements `json:"requirements"`
		Updates      table.Updates      `json:"updates"`
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&raw); err == nil {
		err = json.Unmarshal(body, &typed)
	}
	if err != nil {
		s.fail(w, endpoint, http.StatusBadRequest, "BadRequestException", "decode the request: "+err.Error())
		return
	}
	if id := raw.Identifier; id != nil && !slices.Equal(append(slices.Clone(id.Namespace), id.Name), ident) {
		s.violation(endpoint, "request identifier %v.%s is not the table of the path %v", id.Namespace, id.Name, ident)
		s.fail(w, endpoint, http.StatusBadRequest, "BadRequestException", "identifier does not match the path")
		return
	}

	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	s.mu.Lock()
	s.commits++
	seq := s.commits
	s.mu.Unlock()
	if s.cfg.BeforeCommit != nil {
		err := s.cfg.BeforeCommit(r.Context(), Commit{Ident: ident, Requirements: typed.Requirements, Updates: typed.Updates, Seq: seq})
		var rep *Reply
		switch {
		case errors.As(err, &rep):
			s.fail(w, endpoint, rep.Code, rep.Type, rep.Message)
			return
		case err != nil:
			s.violation(endpoint, "BeforeCommit hook: %v", err)
			s.internal(w, endpoint, err)
			return
		}
	}

	var current table.Metadata
	tbl, err := s.cat.LoadTable(r.Context(), ident)
	switch {
	case err == nil:
		current = tbl.Metadata()
	case errors.Is(err, catalog.ErrNoSuchTable) && hasAssertCreate(raw.Requirements):
		// A create transaction: the backing catalog creates the table.
	case errors.Is(err, catalog.ErrNoSuchTable) || errors.Is(err, catalog.ErrNoSuchNamespace):
		if s.namespaceExists(w, r, endpoint, ident[:len(ident)-1]) {
			s.fail(w, endpoint, http.StatusNotFound, "NoSuchTableException",
				fmt.Sprintf("Table does not exist: %s", strings.Join(ident, ".")))
		}
		return
	default:
		s.internal(w, endpoint, err)
		return
	}
	for _, req := range raw.Requirements {
		if err := checkRequirement(req, current); err != nil {
			s.fail(w, endpoint, http.StatusConflict, "CommitFailedException", err.Error())
			return
		}
	}

	meta, loc, err := s.cat.CommitTable(r.Context(), ident, typed.Requirements, typed.Updates)
	switch {
	case err == nil:
	case errors.Is(err, table.ErrCommitFailed) || strings.Contains(strings.ToLower(err.Error()), "requirement failed"):
		// Another writer of the backing catalog got in between.
		s.fail(w, endpoint, http.StatusConflict, "CommitFailedException", err.Error())
		return
	case errors.Is(err, iceberg.ErrInvalidArgument):
		s.fail(w, endpoint, http.StatusBadRequest, "BadRequestException", err.Error())
		return
	default:
		s.fail(w, endpoint, http.StatusInternalServerError, "CommitStateUnknownException", err.Error())
		return
	}
	s.reply(w, endpoint, http.StatusOK, map[string]any{"metadata-location": loc, "metadata": meta},
		(*checker).commitTableResponse)
}

func hasAssertCreate(reqs []map[string]any) bool {
	return slices.ContainsFunc(reqs, func(r map[string]any) bool { return r["type"] == "assert-create" })
}

// checkRequirement checks one TableRequirement (already checked against its
// schema) against the current metadata, nil when the table does not exist,
// as the spec describes each type.
func checkRequirement(req map[string]any, meta table.Metadata) error {
	typ := req["type"].(string)
	if typ == "assert-create" {
		if meta != nil {
			return errors.New("requirement failed: assert-create: the table already exists")
		}
		return nil
	}
	if meta == nil {
		return fmt.Errorf("requirement failed: %s: the table does not exist", typ)
	}
	// intField reads an integer field the schema check has vouched for.
	intField := func(k string) int64 {
		n, _ := req[k].(json.Number).Int64()
		return n
	}
	mismatch := func(what string, want, got int64) error {
		if want != got {
			return fmt.Errorf("requirement failed: %s: %s is %d, expected %d", typ, what, got, want)
		}
		return nil
	}
	switch typ {
	case "assert-table-uuid":
		// The table UUID must match the requirement's uuid.
		if want := req["uuid"].(string); !strings.EqualFold(want, meta.TableUUID().String()) {
			return fmt.Errorf("requirement failed: %s: table uuid is %s, expected %s", typ, meta.TableUUID(), want)
		}
	case "assert-ref-snapshot-id":
		// The branch or tag ref must reference snapshot-id; a null
		// snapshot-id means the ref must not exist.
		name := req["ref"].(string)
		var cur *table.SnapshotRef
		for n, ref := range meta.Refs() {
			if n == name {
				cur = &ref
			}
		}
		switch {
		case req["snapshot-id"] == nil && cur != nil:
			return fmt.Errorf("requirement failed: %s: %s %q exists (at snapshot %d), expected none", typ, cur.SnapshotRefType, name, cur.SnapshotID)
		case req["snapshot-id"] == nil:
		case cur == nil:
			return fmt.Errorf("requirement failed: %s: ref %q is missing, expected snapshot %d", typ, name, intField("snapshot-id"))
		default:
			return mismatch(fmt.Sprintf("%s %q", cur.SnapshotRefType, name), intField("snapshot-id"), cur.SnapshotID)
		}
	case "assert-last-assigned-field-id":
		return mismatch("last assigned field id", intField("last-assigned-field-id"), int64(meta.LastColumnID()))
	case "assert-current-schema-id":
		return mismatch("current schema id", intField("current-schema-id"), int64(meta.CurrentSchema().ID))
	case "assert-last-assigned-partition-id":
		last := meta.LastPartitionSpecID()
		if last == nil {
			return fmt.Errorf("requirement failed: %s: the table has no last assigned partition id", typ)
		}
		return mismatch("last assigned partition id", intField("last-assigned-partition-id"), int64(*last))
	case "assert-default-spec-id":
		return mismatch("default spec id", intField("default-spec-id"), int64(meta.DefaultPartitionSpec()))
	case "assert-default-sort-order-id":
		return mismatch("default sort order id", intField("default-sort-order-id"), int64(meta.DefaultSortOrder()))
	default:
		// commitTableRequest refused unknown types before this.
		return fmt.Errorf("unknown requirement type %q", typ)
	}
	return nil
}
