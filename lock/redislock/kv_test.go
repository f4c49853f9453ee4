package redislock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/iceberg-maintainer/maintainer/lock"
)

func TestKVSingleNode(t *testing.T) {
	t.Parallel()
	addr := needRedis(t)
	l := newLocker(t, addr)
	testKVRoundTrip(t, l)

	// One node: plain GET/SET, readable by anything.
	key := kvKey(t, l, "-plain")
	if err := l.Put(ctxFor(t), key, []byte("plain")); err != nil {
		t.Fatal(err)
	}
	if v, _ := rawClient(t, addr).Get(ctxFor(t), key).Result(); v != "plain" {
		t.Errorf("stored %q, want the bare value", v)
	}
	// A value left by a multi-node configuration reads without its header.
	left := encodeVersioned(fmt.Sprintf("%016x%016x", 1, 2), []byte("from three nodes"))
	if err := rawClient(t, addr).Set(ctxFor(t), key, left, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Get(ctxFor(t), key); err != nil || string(got) != "from three nodes" {
		t.Errorf("Get of a versioned value on one node = (%q, %v), want the bare value", got, err)
	}
}

func TestKVThreeNodes(t *testing.T) {
	t.Parallel()
	nodes := startNodes(t, 3)
	l := newLocker(t, addrsOf(nodes)...)
	testKVRoundTrip(t, l)

	key := kvKey(t, l, "-versions")
	if err := l.Put(ctxFor(t), key, []byte("current")); err != nil {
		t.Fatal(err)
	}
	raw, _ := rawClient(t, nodes[1].Addr).Get(ctxFor(t), key).Bytes()
	if ver, val := decodeVersioned(raw); ver == "" || string(val) != "current" {
		t.Fatalf("node 1 stores %q, want a versioned %q", raw, "current")
	}
	wantGet := func(what, want string) {
		t.Helper()
		got, err := l.Get(ctxFor(t), key)
		if err != nil {
			t.Fatalf("%s: Get: %v", what, err)
		}
		if string(got) != want {
			t.Fatalf("%s: Get = %q, want %q", what, got, want)
		}
	}

	// A stale version on one node (it missed the last Put) is outvoted.
	stale := encodeVersioned(fmt.Sprintf("%016x%016x", 1, 0), []byte("stale"))
	if err := rawClient(t, nodes[0].Addr).Set(ctxFor(t), key, stale, 0).Err(); err != nil {
		t.Fatal(err)
	}
	wantGet("stale version on node 0", "current")

	// So is a value without a version (left from single-node days).
	if err := rawClient(t, nodes[2].Addr).Set(ctxFor(t), key, "unversioned", 0).Err(); err != nil {
		t.Fatal(err)
	}
	wantGet("unversioned value on node 2", "current")

	// The newest version wins even when only one node has it.
	newest := encodeVersioned(fmt.Sprintf("%016x%016x", uint64(1)<<62, 0), []byte("newest"))
	if err := rawClient(t, nodes[2].Addr).Set(ctxFor(t), key, newest, 0).Err(); err != nil {
		t.Fatal(err)
	}
	wantGet("newer version on node 2 only", "newest")

	// One node down: reads and writes go on; two down: no quorum.
	nodes[2].Stop()
	if err := l.Put(ctxFor(t), key, []byte("after loss")); err != nil {
		t.Fatalf("Put with 2 of 3 nodes: %v", err)
	}
	// (The planted version on dead node 2 is later than this Put's clock;
	// with node 2 gone, the newest the quorum has is this Put.)
	wantGet("Get with 2 of 3 nodes", "after loss")
	nodes[0].Stop()
	if _, err := l.Get(ctxFor(t), key); !errors.Is(err, lock.ErrUnavailable) || !strings.Contains(err.Error(), nodes[0].Addr) {
		t.Errorf("Get with 1 of 3 nodes: %v, want ErrUnavailable naming %s", err, nodes[0].Addr)
	}
	if err := l.Put(ctxFor(t), key, []byte("x")); !errors.Is(err, lock.ErrUnavailable) {
		t.Errorf("Put with 1 of 3 nodes: %v, want ErrUnavailable", err)
	}
}

// kvKey is a test key that is deleted from every node at the end of the
// test: KV values have no expiry, and the test Redis may be shared.
func kvKey(t *testing.T, l *Locker, suffix string) string {
	key := testKey(t, suffix)
	t.Cleanup(func() {
		for _, c := range l.clients {
			_ = c.Del(context.Background(), key).Err()
		}
	})
	return key
}

func testKVRoundTrip(t *testing.T, l *Locker) {
	t.Helper()
	key := kvKey(t, l, "-kv")
	if v, err := l.Get(ctxFor(t), key); v != nil || err != nil {
		t.Fatalf("Get of an absent key = (%q, %v), want (nil, nil)", v, err)
	}
	for _, val := range [][]byte{[]byte("one"), []byte("two"), {0, ':', 0xff, '\n'}, []byte("mkv1:looks-like-a-header")} {
		if err := l.Put(ctxFor(t), key, val); err != nil {
			t.Fatalf("Put(%q): %v", val, err)
		}
		got, err := l.Get(ctxFor(t), key)
		if err != nil || !bytes.Equal(got, val) {
			t.Fatalf("Get after Put(%q) = (%q, %v)", val, got, err)
		}
	}
	if err := l.Put(ctxFor(t), key, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Get(ctxFor(t), key); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("Get of an empty value = (%#v, %v), want an empty non-nil slice", got, err)
	}
	if _, err := l.Get(ctxFor(t), ""); err == nil {
		t.Error("Get with an empty key succeeded")
	}
	if err := l.Put(ctxFor(t), "", []byte("x")); err == nil {
		t.Error("Put with an empty key succeeded")
	}
}

func TestVersionCodec(t *testing.T) {
	l := &Locker{}
	prev := ""
	for range 1000 {
		v := l.nextVersion()
		if len(v) != versionLen || v <= prev {
			t.Fatalf("nextVersion() = %q after %q: want %d hex digits, strictly increasing", v, prev, versionLen)
		}
		prev = v
		ver, val := decodeVersioned(encodeVersioned(v, []byte("x:y")))
		if ver != v || string(val) != "x:y" {
			t.Fatalf("round trip of %q: (%q, %q)", v, ver, val)
		}
	}
	for _, raw := range []string{"", "plain", "mkv1:short:", "mkv1:" + strings.Repeat("g", 32) + ":x", "mkv1:" + strings.Repeat("A", 32) + ":x", "mkv1:" + strings.Repeat("0", 32) + "x"} {
		if ver, val := decodeVersioned([]byte(raw)); ver != "" || string(val) != raw {
			t.Errorf("decodeVersioned(%q) = (%q, %q), want unversioned and whole", raw, ver, val)
		}
	}
}
