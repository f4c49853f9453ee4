package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/iceberg-maintainer/maintainer/internal/rowfilter"
)

// triggerResponse is the 202 body of both trigger endpoints.
type triggerResponse struct {
	Queued []Enqueued `json:"queued"`
	Note   string     `json:"note,omitempty"`
}

// handleTrigger serves POST /v1/trigger: one Request for one table.
func (s *Server) handleTrigger(w http.ResponseWriter, r *http.Request) {
	count := func(result string) { s.m.trigger(SourceHTTP, result, 1) }
	if !allowMethods(w, r, http.MethodPost) {
		count(resultRejected)
		return
	}
	if ok, status := s.authorize(w, r); !ok {
		count(authResult(status))
		return
	}
	if s.stopping.Load() {
		count(resultError)
		writeStopping(w)
		return
	}
	// where is read apart, to tell a blank scope from none.
	var body struct {
		Request
		Where *string `json:"where"`
	}
	if code, msg := s.decodeBody(w, r, &body, true); code != 0 {
		count(resultRejected)
		writeError(w, code, msg)
		return
	}
	req := body.Request
	if body.Where != nil {
		req.Where = *body.Where
	}
	req.Table = strings.TrimSpace(req.Table)
	if req.Table == "" {
		count(resultRejected)
		writeError(w, http.StatusBadRequest, `field "table" is required, e.g. {"table": "ns.table"}`)
		return
	}
	tasks, err := s.normalizeTasks(req.Tasks)
	if err != nil {
		count(resultRejected)
		writeError(w, http.StatusBadRequest, fmt.Sprintf("field \"tasks\": %v", err))
		return
	}
	req.Tasks = tasks
	req.Where = strings.TrimSpace(req.Where)
	if body.Where != nil && req.Where == "" {
		// A script's "where": "$FILTER" with the variable unset must not
		// turn a scoped run into one of the whole table.
		count(resultRejected)
		writeError(w, http.StatusBadRequest, `field "where" is empty; leave it out to ask for a run without a scope`)
		return
	}
	if req.Where != "" {
		if _, err := rowfilter.Parse(req.Where); err != nil {
			count(resultRejected)
			writeError(w, http.StatusBadRequest, fmt.Sprintf("field \"where\": %s", strings.TrimPrefix(err.Error(), "where: ")))
			return
		}
	}
	req.Source = SourceHTTP

	ctx, cancel := context.WithTimeout(r.Context(), enqueueBudget)
	defer cancel()
	enq, err := s.queue.Enqueue(ctx, req)
	if err != nil {
		code, result := enqueueStatus(err)
		count(result)
		if code >= 500 {
			s.log.Error("enqueue failed", "source", SourceHTTP, "table", req.Table, "err", err)
		}
		if code == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "5")
		}
		writeError(w, code, enqueueMessage(req.Table, err))
		return
	}
	count(enqueueResult(enq))
	s.log.Info("maintenance requested", "source", SourceHTTP, "table", enq.Table,
		"task", strings.Join(enq.Tasks, ","), "force", req.Force, "where", req.Where, "state", enq.State, "held", len(enq.Held))
	writeJSON(w, http.StatusAccepted, triggerResponse{Queued: []Enqueued{enq}})
}

// authResult is the trigger result of a failed authorize.
func authResult(status int) string {
	if status == http.StatusUnauthorized {
		return resultUnauthorized
	}
	return resultError
}

// writeStopping answers 503 with Retry-After, so Alertmanager and scripts
// retry against the replica that replaces us.
func writeStopping(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "5")
	writeError(w, http.StatusServiceUnavailable, "server is "+ErrStopping.Error()+"; retry later")
}
