package expire

import (
	"encoding/json"
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/units"
)

// The JSON of Policy and RemovedRef writes their ages as durations in the
// config's form ("5d"), not as nanoseconds, and reads them back.

type (
	plainPolicy struct {
		plain
		MaxSnapshotAge units.Duration `json:"max_snapshot_age"`
		MaxRefAge      units.Duration `json:"max_ref_age"`
	}
	plain    Policy
	plainRef struct {
		ref
		Age       units.Duration `json:"age"`
		MaxRefAge units.Duration `json:"max_ref_age"`
	}
	ref RemovedRef
)

func (p Policy) MarshalJSON() ([]byte, error) {
	return json.Marshal(plainPolicy{plain(p), units.Duration(p.MaxSnapshotAge), units.Duration(p.MaxRefAge)})
}

func (p *Policy) UnmarshalJSON(b []byte) error {
	var v plainPolicy
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*p = Policy(v.plain)
	p.MaxSnapshotAge, p.MaxRefAge = time.Duration(v.MaxSnapshotAge), time.Duration(v.MaxRefAge)
	return nil
}

func (r RemovedRef) MarshalJSON() ([]byte, error) {
	return json.Marshal(plainRef{ref(r), units.Duration(r.Age), units.Duration(r.MaxRefAge)})
}

func (r *RemovedRef) UnmarshalJSON(b []byte) error {
	var v plainRef
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*r = RemovedRef(v.ref)
	r.Age, r.MaxRefAge = time.Duration(v.Age), time.Duration(v.MaxRefAge)
	return nil
}
