package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
)

// tokenSource holds the bearer token read from a file and re-reads the file
// when it changes. Kubernetes rotates a mounted secret by swapping a symlink,
// which changes the file identity, mtime or size seen through os.Stat; a
// stat per request is cheap next to the work a trigger causes.
type tokenSource struct {
	path string

	mu   sync.Mutex
	info os.FileInfo
	sum  [sha256.Size]byte // SHA-256 of the token; the token itself is not kept
}

var errEmptyToken = errors.New("token file is empty")

func newTokenSource(path string) (*tokenSource, error) {
	t := &tokenSource{path: path}
	if err := t.reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// reload reads the file if it changed since the last read. Callers hold mu,
// except newTokenSource which owns t.
func (t *tokenSource) reload() error {
	info, err := os.Stat(t.path)
	if err != nil {
		return fmt.Errorf("read token file: %w", err)
	}
	if t.info != nil && os.SameFile(t.info, info) && info.ModTime().Equal(t.info.ModTime()) && info.Size() == t.info.Size() {
		return nil
	}
	b, err := os.ReadFile(t.path)
	if err != nil {
		return fmt.Errorf("read token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return fmt.Errorf("read token file %s: %w", t.path, errEmptyToken)
	}
	t.sum = sha256.Sum256([]byte(tok))
	t.info = info
	return nil
}

// check compares the presented token with the current one in constant time
// (hashing both first so the length does not leak either). A file that can
// no longer be read fails closed: err is set and no token is accepted.
func (t *tokenSource) check(presented string) (ok bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.reload(); err != nil {
		t.info = nil // force a re-read next time, and accept nothing now
		return false, err
	}
	got := sha256.Sum256([]byte(presented))
	return subtle.ConstantTimeCompare(got[:], t.sum[:]) == 1, nil
}

// bearerToken extracts the token of an "Authorization: Bearer <token>" header.
func bearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, found := strings.Cut(h, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// authorize answers 401 (or 500 when the token file broke) and returns false
// unless the request carries the configured token. With no token file every
// request passes.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) (ok bool, status int) {
	if s.token == nil {
		return true, 0
	}
	tok, present := bearerToken(r)
	if !present {
		w.Header().Set("WWW-Authenticate", `Bearer realm="maintainer"`)
		writeError(w, http.StatusUnauthorized, "missing bearer token")
		return false, http.StatusUnauthorized
	}
	good, err := s.token.check(tok)
	if err != nil {
		s.log.Error("bearer token unavailable; rejecting request", "err", err)
		writeError(w, http.StatusInternalServerError, "server token unavailable")
		return false, http.StatusInternalServerError
	}
	if !good {
		w.Header().Set("WWW-Authenticate", `Bearer realm="maintainer", error="invalid_token"`)
		writeError(w, http.StatusUnauthorized, "invalid bearer token")
		return false, http.StatusUnauthorized
	}
	return true, 0
}
