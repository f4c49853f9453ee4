package orphans

import (
	"errors"
	"fmt"
	"hash/maphash"
	"net/url"
	pathpkg "path"
	"strings"
	"sync"
)

// loc is a file location split for comparison: a listed file and a
// referenced path are the same file when their canonical prefixes (scheme
// and authority after the equal_* mappings) and their paths are equal.
type loc struct {
	scheme    string // lower-cased; "file" for a bare absolute path
	authority string // as written ("" for local files)
	path      string // from the first "/" after the authority: object keys as written, local paths decoded and cleaned
	rawPrefix string // what precedes the path as written: "s3a://bucket", "file://", "file:", ""
}

var errRelative = errors.New("not an absolute location")

// parseLoc splits raw. Object-store keys are kept exactly as written (they
// are opaque: "a//b" and "a/b" are different objects); local paths (bare or
// file: URIs) are decoded and cleaned the way iceberg-go's local IO opens
// them. A relative path cannot be compared with a listing and is an error.
func parseLoc(raw string) (loc, error) {
	if raw == "" {
		return loc{}, errors.New("empty location")
	}
	if i := schemeEnd(raw); i > 0 {
		l := loc{scheme: strings.ToLower(raw[:i])}
		rest := raw[i+1:]
		if strings.HasPrefix(rest, "//") {
			rest = rest[2:]
			j := strings.IndexByte(rest, '/')
			if j < 0 {
				j = len(rest)
			}
			l.authority, rest = rest[:j], rest[j:]
		} else if !strings.HasPrefix(rest, "/") {
			return loc{}, fmt.Errorf("%q: %w", raw, errRelative)
		}
		l.rawPrefix = raw[:len(raw)-len(rest)]
		if rest == "" {
			rest = "/"
		}
		l.path = rest
		if l.scheme == "file" {
			if strings.EqualFold(l.authority, "localhost") {
				l.authority = ""
			}
			if p, err := url.PathUnescape(rest); err == nil {
				rest = p
			}
			l.path = pathpkg.Clean(rest)
		}
		return l, nil
	}
	if !strings.HasPrefix(raw, "/") {
		return loc{}, fmt.Errorf("%q: %w", raw, errRelative)
	}
	return loc{scheme: "file", path: pathpkg.Clean(raw)}, nil
}

// schemeEnd returns the index of the colon ending a URI scheme, or -1. A
// scheme is a letter followed by letters, digits, "+", "-" or "."; single
// letters are taken for Windows drives and are not schemes.
func schemeEnd(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ':':
			if i < 2 {
				return -1
			}
			return i
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return -1
		}
	}
	return -1
}

// join appends a relative path to a location as written.
func join(base, rel string) string {
	return strings.TrimSuffix(base, "/") + "/" + strings.TrimPrefix(rel, "/")
}

// normalizer applies the equal_schemes and equal_authorities mappings.
type normalizer struct {
	schemes, authorities map[string]string
}

func newNormalizer(cfg Config) (normalizer, error) {
	s, err := flattenEquivalences(cfg.EqualSchemes, true)
	if err != nil {
		return normalizer{}, fmt.Errorf("equal_schemes: %w", err)
	}
	a, err := flattenEquivalences(cfg.EqualAuthorities, false)
	if err != nil {
		return normalizer{}, fmt.Errorf("equal_authorities: %w", err)
	}
	return normalizer{schemes: s, authorities: a}, nil
}

// prefix is the canonical "scheme://authority" of l.
func (n normalizer) prefix(l loc) string {
	s := l.scheme
	if m, ok := n.schemes[s]; ok {
		s = m
	}
	a := l.authority
	if m, ok := n.authorities[a]; ok {
		a = m
	} else if at := strings.LastIndexByte(a, '@'); at >= 0 {
		// ADLS: container@account.host; map the host alone.
		if m, ok := n.authorities[a[at+1:]]; ok {
			a = a[:at+1] + m
		}
	}
	return s + "://" + a
}

// under reports whether l lies in (or is) dir, compared canonically.
func (n normalizer) under(l, dir loc) bool {
	return n.prefix(l) == n.prefix(dir) && pathUnder(l.path, dir.path)
}

func pathUnder(p, dir string) bool {
	if p == dir {
		return true
	}
	return strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// hiddenSegment returns the first segment of rel (a path below the table
// location) that marks a hidden or staging file: a name starting with "_"
// or ".", unless it is a partition folder "<field>=<value>" of a partition
// field whose name itself starts with "_" or "." (Spark's
// PartitionAwareHiddenPathFilter). Returns "" when nothing is hidden.
func hiddenSegment(rel string, hiddenFields map[string]bool) string {
	for seg := range strings.SplitSeq(strings.Trim(rel, "/"), "/") {
		if isHiddenName(seg, hiddenFields) {
			return seg
		}
	}
	return ""
}

func isHiddenName(name string, hiddenFields map[string]bool) bool {
	if name == "" || (name[0] != '_' && name[0] != '.') {
		return false
	}
	if i := strings.IndexByte(name, '='); i > 0 && hiddenFields[name[:i]] {
		return false
	}
	return true
}

// ---------------------------------------------------------------------------
// The referenced set.

// pathHash is a 128-bit hash of a path. A collision can only make an orphan
// look referenced (it is then kept), never the reverse: a referenced path
// always finds its own entry.
type pathHash [2]uint64

type hasher struct{ a, b maphash.Seed }

func newHasher() hasher { return hasher{maphash.MakeSeed(), maphash.MakeSeed()} }

func (h hasher) sum(s string) pathHash {
	return pathHash{maphash.String(h.a, s), maphash.String(h.b, s)}
}

func (h hasher) sumBytes(b []byte) pathHash {
	return pathHash{maphash.Bytes(h.a, b), maphash.Bytes(h.b, b)}
}

// refSet holds the referenced paths as hashes of their path component,
// each with the raw prefixes ("s3a://bucket") it was referenced under, so
// that a listed file whose path matches under another prefix is detected as
// a prefix mismatch. About 40 bytes a path.
type refSet struct {
	h    hasher
	norm normalizer
	// scope, if set, keeps only paths inside it (paths elsewhere can never
	// match a listed file); keep, if set, keeps only the hashes it accepts.
	scope string
	keep  func(pathHash) bool

	mu       sync.Mutex
	paths    map[pathHash]uint32 // raw prefix id, or multiBit|index into multi
	multi    [][]uint32
	prefixes []string // raw prefix by id
	canon    []string // canonical prefix by id
	ids      map[string]uint32
}

const multiBit = 1 << 31

func newRefSet(h hasher, norm normalizer, scope string) *refSet {
	return &refSet{h: h, norm: norm, scope: scope, paths: map[pathHash]uint32{}, ids: map[string]uint32{}}
}

type parsedRef struct {
	h      pathHash
	prefix string
	canon  string
}

// add records referenced paths. An unparsable (e.g. relative) path is an
// error: a reference we cannot compare could hide a live file.
func (r *refSet) add(raws []string) error {
	batch := make([]parsedRef, 0, len(raws))
	for _, raw := range raws {
		l, err := parseLoc(raw)
		if err != nil {
			return fmt.Errorf("referenced path: %w", err)
		}
		if r.scope != "" && !pathUnder(l.path, r.scope) {
			continue
		}
		h := r.h.sum(l.path)
		if r.keep != nil && !r.keep(h) {
			continue
		}
		batch = append(batch, parsedRef{h: h, prefix: l.rawPrefix, canon: r.norm.prefix(l)})
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range batch {
		id, ok := r.ids[p.prefix]
		if !ok {
			id = uint32(len(r.prefixes))
			r.ids[p.prefix] = id
			r.prefixes = append(r.prefixes, p.prefix)
			r.canon = append(r.canon, p.canon)
		}
		v, ok := r.paths[p.h]
		switch {
		case !ok:
			r.paths[p.h] = id
		case v&multiBit != 0:
			m := &r.multi[v&^multiBit]
			if !containsID(*m, id) {
				*m = append(*m, id)
			}
		case v != id:
			r.multi = append(r.multi, []uint32{v, id})
			r.paths[p.h] = multiBit | uint32(len(r.multi)-1)
		}
	}
	return nil
}

func containsID(ids []uint32, id uint32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// match classifies a listed file: referenced when some reference has its
// path and canonical prefix; otherwise the references with its path under
// other prefixes (as raw paths) are returned as mismatches.
func (r *refSet) match(l loc) (referenced bool, mismatches []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.paths[r.h.sum(l.path)]
	if !ok {
		return false, nil
	}
	ids := []uint32{v}
	if v&multiBit != 0 {
		ids = r.multi[v&^multiBit]
	}
	canon := r.norm.prefix(l)
	for _, id := range ids {
		if r.canon[id] == canon {
			return true, nil
		}
	}
	for _, id := range ids {
		mismatches = append(mismatches, r.prefixes[id]+l.path)
	}
	return false, mismatches
}
