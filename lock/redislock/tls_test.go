package redislock

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/redistest"
	"github.com/iceberg-maintainer/maintainer/lock"
)

// A Redis that only speaks TLS: locks and the key-value store work with the
// CA trusted, and without TLS the backend is unavailable, not busy.
func TestTLS(t *testing.T) {
	srv, caPEM := redistest.StartTLS(t)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)

	cfg := DefaultConfig()
	cfg.Addrs = []string{srv.Addr}
	cfg.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	ctx := ctxFor(t)
	if err := l.Ping(ctx); err != nil {
		t.Fatalf("Ping over TLS: %v", err)
	}
	h, err := l.TryLock(ctx, "tls-test:lock:default:db.t", 5*time.Second)
	if err != nil {
		t.Fatalf("TryLock over TLS: %v", err)
	}
	if _, err := l.TryLock(ctx, "tls-test:lock:default:db.t", 5*time.Second); !errors.Is(err, lock.ErrBusy) {
		t.Errorf("second TryLock: %v; want ErrBusy", err)
	}
	if err := h.Release(ctx); err != nil {
		t.Errorf("Release: %v", err)
	}
	if err := l.Put(ctx, "tls-test:state:k", []byte("v")); err != nil {
		t.Fatalf("Put over TLS: %v", err)
	}
	if v, err := l.Get(ctx, "tls-test:state:k"); err != nil || string(v) != "v" {
		t.Errorf("Get over TLS = %q, %v", v, err)
	}

	plain := DefaultConfig()
	plain.Addrs = []string{srv.Addr}
	pl, err := New(plain)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pl.Close() })
	if err := pl.Ping(ctx); !errors.Is(err, lock.ErrUnavailable) {
		t.Errorf("Ping without TLS: %v; want ErrUnavailable", err)
	}
	if _, err := pl.TryLock(ctx, "tls-test:lock:default:db.u", 5*time.Second); !errors.Is(err, lock.ErrUnavailable) {
		t.Errorf("TryLock without TLS: %v; want ErrUnavailable", err)
	}
}
