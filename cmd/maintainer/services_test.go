package main

import (
	"testing"

	"github.com/iceberg-maintainer/maintainer/config"
)

// Replicas that select the same tables share one fleet, whatever the order
// of tables[] or --table; a different selection is another fleet.
func TestFleetKeyFollowsTheSelection(t *testing.T) {
	cfg := func(matches ...string) *config.Config {
		c := &config.Config{Catalog: config.CatalogConfig{Name: "prod"}, Lock: config.LockConfig{Redis: config.RedisConfig{KeyPrefix: "p"}}}
		for _, m := range matches {
			c.Tables = append(c.Tables, config.TableOverride{Match: m})
		}
		return c
	}
	a := fleetKey(cfg("db.*", "logs.events"), nil)
	if b := fleetKey(cfg("logs.events", "db.*", "db.*"), nil); a != b {
		t.Errorf("same selection, other order: %s and %s", a, b)
	}
	for _, other := range []string{fleetKey(cfg("db.*"), nil), fleetKey(cfg("db.*", "logs.events"), []string{"db.x"}), fleetKey(cfg(), nil)} {
		if other == a {
			t.Errorf("another selection shares the fleet key %s", a)
		}
	}
	if want := "p:fleet:prod:"; a[:len(want)] != want {
		t.Errorf("key %s; want it under %s", a, want)
	}
}
