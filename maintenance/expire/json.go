package expire

import (
	"encoding/json"

	"github.com/iceberg-maintainer/maintainer/internal/duration"
)

// MarshalJSON writes the ages as durations in the config's form ("5d"),
// not as nanoseconds.
func (p Policy) MarshalJSON() ([]byte, error) {
	type plain Policy
	return json.Marshal(struct {
		plain
		MaxSnapshotAge duration.Duration `json:"max_snapshot_age"`
		MaxRefAge      duration.Duration `json:"max_ref_age"`
	}{plain(p), duration.Duration(p.MaxSnapshotAge), duration.Duration(p.MaxRefAge)})
}

// MarshalJSON writes the ages as durations in the config's form ("5d"),
// not as nanoseconds.
func (r RemovedRef) MarshalJSON() ([]byte, error) {
	type plain RemovedRef
	return json.Marshal(struct {
		plain
		Age       duration.Duration `json:"age"`
		MaxRefAge duration.Duration `json:"max_ref_age"`
	}{plain(r), duration.Duration(r.Age), duration.Duration(r.MaxRefAge)})
}
