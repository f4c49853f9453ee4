package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// amVersion is the only webhook payload version Alertmanager has sent since
// v0.7; a new version may change the shape, so anything else is refused.
const amVersion = "4"

// maxReasons caps how many alert reasons are joined into one table's reason.
const maxReasons = 5

// amPayload is the Alertmanager webhook body (Alertmanager's template.Data
// plus version, groupKey and truncatedAlerts). Unknown fields are accepted:
// Alertmanager and compatible senders (Grafana, Mimir) add fields over time,
// and refusing them would silently drop alerts.
type amPayload struct {
	Version           string            `json:"version"`
	GroupKey          string            `json:"groupKey"`
	TruncatedAlerts   int               `json:"truncatedAlerts"`
	Status            string            `json:"status"`
	Receiver          string            `json:"receiver"`
	GroupLabels       map[string]string `json:"groupLabels"`
	CommonLabels      map[string]string `json:"commonLabels"`
	CommonAnnotations map[string]string `json:"commonAnnotations"`
	ExternalURL       string            `json:"externalURL"`
	Alerts            []amAlert         `json:"alerts"`
}

type amAlert struct {
	Status       string            `json:"status"` // "firing" or "resolved"
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Fingerprint  string            `json:"fingerprint"`
}

// badAlert names one alert that made a notification invalid.
type badAlert struct {
	Alertname   string `json:"alertname"`
	Fingerprint string `json:"fingerprint"`
	Error       string `json:"error"`
}

func (b badAlert) String() string {
	if b.Fingerprint == "" {
		return fmt.Sprintf("alert %q: %s", b.Alertname, b.Error)
	}
	return fmt.Sprintf("alert %q (fingerprint %s): %s", b.Alertname, b.Fingerprint, b.Error)
}

type amRejection struct {
	Error  string     `json:"error"`
	Alerts []badAlert `json:"alerts"`
}

// amFailure is a failed enqueue part-way: what made it in is listed so the
// retry Alertmanager makes on a 5xx is understood to merge, not double.
type amFailure struct {
	Error  string     `json:"error"`
	Queued []Enqueued `json:"queued"`
}

// tableWork accumulates the firing alerts of one table.
type tableWork struct {
	table   string
	all     bool // some alert asked for every task
	tasks   map[string]bool
	reasons []string
	seen    map[string]bool
}

// handleAlertmanager serves POST /v1/alertmanager. It validates every firing
// alert before enqueuing any: a notification is either applied whole or
// refused whole, so the sender sees one clear answer and a fixed rule
// re-sends all of it.
func (s *Server) handleAlertmanager(w http.ResponseWriter, r *http.Request) {
	count := func(result string, n int) { s.m.trigger(SourceAlertmanager, result, n) }
	if !allowMethods(w, r, http.MethodPost) {
		count(resultRejected, 1)
		return
	}
	if ok, status := s.authorize(w, r); !ok {
		count(authResult(status), 1)
		return
	}
	if s.stopping.Load() {
		count(resultError, 1)
		writeStopping(w)
		return
	}
	var p amPayload
	if code, msg := s.decodeBody(w, r, &p, false); code != 0 {
		count(resultRejected, 1)
		writeError(w, code, msg)
		return
	}
	if p.Version != amVersion {
		count(resultRejected, 1)
		writeError(w, http.StatusBadRequest, fmt.Sprintf("unsupported Alertmanager webhook version %q; want %q", p.Version, amVersion))
		return
	}

	var (
		bad     []badAlert
		firing  int // firing alerts, valid or not
		odd     int // alerts with a status that is neither
		ignored int
		work    []*tableWork
		byTable = map[string]*tableWork{}
	)
	for _, a := range p.Alerts {
		switch a.Status {
		case "resolved":
			ignored++ // maintenance is started by a problem, not by its end
			continue
		case "firing":
		default:
			odd++
			bad = append(bad, s.badAlert(a, fmt.Sprintf("status %q is neither firing nor resolved", a.Status)))
			continue
		}
		firing++
		table, task, msg := s.alertTarget(a)
		if msg != "" {
			bad = append(bad, s.badAlert(a, msg))
			continue
		}
		tw := byTable[table]
		if tw == nil {
			tw = &tableWork{table: table, tasks: map[string]bool{}, seen: map[string]bool{}}
			byTable[table] = tw
			work = append(work, tw)
		}
		if task == "" {
			tw.all = true
		} else {
			tw.tasks[task] = true
		}
		if reason := alertReason(a); !tw.seen[reason] {
			tw.seen[reason] = true
			tw.reasons = append(tw.reasons, reason)
		}
	}
	count(resultIgnored, ignored)

	if len(bad) > 0 {
		count(resultRejected, firing+odd) // none of them is queued
		msgs := make([]string, len(bad))
		for i, b := range bad {
			msgs[i] = b.String()
		}
		s.log.Warn("alertmanager notification rejected", "receiver", p.Receiver, "bad_alerts", len(bad),
			"err", strings.Join(msgs, "; "))
		writeJSON(w, http.StatusBadRequest, amRejection{
			Error:  fmt.Sprintf("%d invalid alert(s), nothing was queued: %s", len(bad), strings.Join(msgs, "; ")),
			Alerts: bad,
		})
		return
	}

	var notes []string
	if p.TruncatedAlerts > 0 {
		// Alertmanager's max_alerts dropped some; they will not reach us.
		s.log.Warn("alertmanager truncated the notification", "receiver", p.Receiver, "truncated", p.TruncatedAlerts)
		notes = append(notes, fmt.Sprintf("%d alert(s) were truncated by Alertmanager (max_alerts) and not seen", p.TruncatedAlerts))
	}
	if len(work) == 0 {
		notes = append(notes, fmt.Sprintf("no firing alerts (%d resolved ignored); nothing queued", ignored))
		writeJSON(w, http.StatusAccepted, triggerResponse{Queued: []Enqueued{}, Note: strings.Join(notes, "; ")})
		return
	}
	if ignored > 0 {
		notes = append(notes, fmt.Sprintf("%d resolved alert(s) ignored", ignored))
	}

	// One budget for the whole notification: each enqueue may read a
	// table's rate limits, and Alertmanager must get its answer before
	// its webhook timeout however many tables the alerts name. Past the
	// budget the requests are still queued; their runs apply the limits.
	ctx, cancel := context.WithTimeout(r.Context(), enqueueBudget)
	defer cancel()
	queued := make([]Enqueued, 0, len(work))
	for i, tw := range work {
		req := Request{Table: tw.table, Reason: joinReasons(tw.reasons), Source: SourceAlertmanager}
		if !tw.all {
			for _, t := range s.tasks {
				if tw.tasks[t] {
					req.Tasks = append(req.Tasks, t)
				}
			}
		}
		enq, err := s.queue.Enqueue(ctx, req)
		if err != nil {
			code, result := enqueueStatus(err)
			count(result, 1)
			count(resultError, len(work)-i-1) // not attempted
			if code >= 500 {
				s.log.Error("enqueue failed", "source", SourceAlertmanager, "table", tw.table, "err", err)
			}
			if code == http.StatusServiceUnavailable {
				w.Header().Set("Retry-After", "5")
			}
			writeJSON(w, code, amFailure{Error: enqueueMessage(tw.table, err), Queued: queued})
			return
		}
		count(enqueueResult(enq), 1)
		s.log.Info("maintenance requested", "source", SourceAlertmanager, "table", enq.Table,
			"task", strings.Join(enq.Tasks, ","), "state", enq.State, "held", len(enq.Held), "receiver", p.Receiver)
		queued = append(queued, enq)
	}
	writeJSON(w, http.StatusAccepted, triggerResponse{Queued: queued, Note: strings.Join(notes, "; ")})
}

// alertTarget resolves the table and optional task of a firing alert, or
// returns what is wrong with it.
func (s *Server) alertTarget(a amAlert) (table, task, problem string) {
	table = strings.TrimSpace(a.Labels[s.cfg.AlertTableLabel])
	if table == "" {
		return "", "", fmt.Sprintf("missing label %q", s.cfg.AlertTableLabel)
	}
	if s.cfg.AlertNamespaceLabel != "" {
		// The maintainer's own gauges carry table="ns.table", and a
		// Kubernetes scrape adds namespace="<k8s namespace>" to them; so
		// "namespace.table" is tried first and the table label alone when
		// only that names a managed table.
		if ns := strings.TrimSpace(a.Labels[s.cfg.AlertNamespaceLabel]); ns != "" && !strings.HasPrefix(table, ns+".") {
			if joined := ns + "." + table; s.queue.Known(joined) || !s.queue.Known(table) {
				table = joined
			}
		}
	}
	var problems []string
	if s.cfg.AlertTaskLabel != "" {
		task = strings.TrimSpace(a.Labels[s.cfg.AlertTaskLabel])
		if task != "" && !slices.Contains(s.tasks, task) {
			problems = append(problems, fmt.Sprintf("label %s=%q is not a task; must be one of %s",
				s.cfg.AlertTaskLabel, task, strings.Join(s.tasks, ", ")))
		}
	}
	if !s.queue.Known(table) {
		problems = append(problems, fmt.Sprintf("%v %q", ErrUnknownTable, table))
	}
	return table, task, strings.Join(problems, "; ")
}

func (s *Server) badAlert(a amAlert, msg string) badAlert {
	return badAlert{Alertname: a.Labels["alertname"], Fingerprint: a.Fingerprint, Error: msg}
}

// alertReason is "alert <alertname>[: <summary>]".
func alertReason(a amAlert) string {
	reason := "alert " + a.Labels["alertname"]
	if sum := strings.TrimSpace(a.Annotations["summary"]); sum != "" {
		reason += ": " + sum
	}
	return reason
}

func joinReasons(rs []string) string {
	if len(rs) > maxReasons {
		return strings.Join(rs[:maxReasons], "; ") + fmt.Sprintf("; and %d more alert(s)", len(rs)-maxReasons)
	}
	return strings.Join(rs, "; ")
}
