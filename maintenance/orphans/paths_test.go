package orphans

import (
	"errors"
	"slices"
	"testing"
)

func TestParseLoc(t *testing.T) {
	cases := []struct {
		in                      string
		scheme, authority, path string
		prefix                  string
	}{
		{"s3://bucket/wh/t/x.parquet", "s3", "bucket", "/wh/t/x.parquet", "s3://bucket"},
		{"S3A://bucket/wh//t/./x", "s3a", "bucket", "/wh//t/./x", "S3A://bucket"}, // object keys are opaque
		{"s3://bucket", "s3", "bucket", "/", "s3://bucket"},
		{"hdfs://nn:8020/wh/t", "hdfs", "nn:8020", "/wh/t", "hdfs://nn:8020"},
		{"file:///tmp/a%20b/./c//d", "file", "", "/tmp/a b/c/d", "file://"},
		{"file:/tmp/x", "file", "", "/tmp/x", "file:"},
		{"file://localhost/tmp/x", "file", "", "/tmp/x", "file://localhost"},
		{"/tmp/t/../u/x", "file", "", "/tmp/u/x", ""},
		{"abfss://c@acct.dfs.core.windows.net/t/x", "abfss", "c@acct.dfs.core.windows.net", "/t/x", "abfss://c@acct.dfs.core.windows.net"},
	}
	for _, c := range cases {
		l, err := parseLoc(c.in)
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if l.scheme != c.scheme || l.authority != c.authority || l.path != c.path || l.rawPrefix != c.prefix {
			t.Errorf("%s: got %+v", c.in, l)
		}
	}
	for _, bad := range []string{"", "data/x.parquet", "./lineitem/x", "s3:relative/x", "C:/x"} {
		if _, err := parseLoc(bad); err == nil {
			t.Errorf("%q parsed; relative or empty locations must be refused", bad)
		}
	}
	if _, err := parseLoc("rel/x"); !errors.Is(err, errRelative) {
		t.Errorf("relative: %v", err)
	}
}

func TestReferenceMatching(t *testing.T) {
	refs := []string{
		"s3a://bucket/wh/t/data/a.parquet",
		"s3://other/wh/t/data/b.parquet",
		"s3://bucket/wh/t/data/c.parquet",
		"s3n://bucket/wh/t/data/c.parquet", // the same file twice
		"s3://other/wh/t/data/d.parquet",   // under two authorities
		"s3a://bucket/wh/t/data/d.parquet",
		"file:/tmp/t/e",
		"/tmp/t/f",
		"s3://bucket/elsewhere/g", // outside the scope
	}
	type want struct {
		referenced bool
		mismatches []string
	}
	cases := []struct {
		name string
		cfg  func(*Config)
		want map[string]want
	}{
		{"defaults: s3a and s3n equal s3", func(*Config) {}, map[string]want{
			"s3://bucket/wh/t/data/a.parquet": {true, nil},
			"s3://bucket/wh/t/data/b.parquet": {false, []string{"s3://other/wh/t/data/b.parquet"}},
			"s3://bucket/wh/t/data/c.parquet": {true, nil},
			"s3://bucket/wh/t/data/d.parquet": {true, nil},
			"s3://bucket/wh/t/data/z.parquet": {false, nil},
			"file:///tmp/t/e":                 {true, nil},
			"file:/tmp/t/f":                   {true, nil},
			"s3://bucket/elsewhere/g":         {true, nil}, // the scoped set drops it
		}},
		{"no scheme equivalence", func(c *Config) { c.EqualSchemes = nil }, map[string]want{
			"s3://bucket/wh/t/data/a.parquet": {false, []string{"s3a://bucket/wh/t/data/a.parquet"}},
			"s3://bucket/wh/t/data/c.parquet": {true, nil},
			"s3://bucket/wh/t/data/d.parquet": {false, []string{"s3://other/wh/t/data/d.parquet", "s3a://bucket/wh/t/data/d.parquet"}},
		}},
		{"authority equivalence", func(c *Config) { c.EqualAuthorities = map[string]string{"other": "bucket"} }, map[string]want{
			"s3://bucket/wh/t/data/b.parquet": {true, nil},
			"s3://other/wh/t/data/a.parquet":  {true, nil},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.cfg(&cfg)
			norm, err := newNormalizer(cfg)
			if err != nil {
				t.Fatal(err)
			}
			set := newRefSet(newHasher(), norm, "")
			scoped := newRefSet(newHasher(), norm, "/wh/t")
			for _, s := range []*refSet{set, scoped} {
				if err := s.add(refs); err != nil {
					t.Fatal(err)
				}
			}
			for listed, w := range tc.want {
				l, err := parseLoc(listed)
				if err != nil {
					t.Fatal(err)
				}
				ref, mism := set.match(l)
				slices.Sort(mism)
				if ref != w.referenced || !slices.Equal(mism, w.mismatches) {
					t.Errorf("%s: referenced=%v mismatches=%v; want %v %v", listed, ref, mism, w.referenced, w.mismatches)
				}
				if pathUnder(l.path, "/wh/t") {
					if sref, _ := scoped.match(l); sref != ref {
						t.Errorf("%s: scoped set disagrees", listed)
					}
				}
			}
		})
	}
	norm, _ := newNormalizer(DefaultConfig())
	if err := newRefSet(newHasher(), norm, "").add([]string{"data/relative.parquet"}); !errors.Is(err, errRelative) {
		t.Fatalf("a relative reference must fail the plan: %v", err)
	}
}

func TestHiddenSegment(t *testing.T) {
	fields := map[string]bool{"_day": true}
	cases := map[string]string{
		"data/_temporary/0/task/x.parquet":      "_temporary",
		".spark-staging/x.parquet":              ".spark-staging",
		"metadata/.v1.metadata.json.crc":        ".v1.metadata.json.crc",
		"data/p=1/_SUCCESS":                     "_SUCCESS",
		"data/_day=2026-01-01/x.parquet":        "",
		"data/_c=1/x.parquet":                   "_c=1",
		"data/_day/x.parquet":                   "_day",
		"data/event_time_day=2024-01-01/x.parq": "",
		"data/a=_b/x.parquet":                   "",
		"data/x.avro_tmp":                       "",
	}
	for rel, want := range cases {
		if got := hiddenSegment(rel, fields); got != want {
			t.Errorf("%s: hidden segment %q, want %q", rel, got, want)
		}
	}
}
