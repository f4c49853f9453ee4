package maintenance

import "encoding/json"

// Setting is one effective value of a table's policy that something other
// than the built-in default set, with where it came from: "config
// defaults", "config tables[2]", "table property maintainer.compact.enabled"
// or "table property write.target-file-size-bytes". plan and status show
// them.
type Setting struct {
	Key string `json:"key"` // compact.target_file_size, compact.trigger.commit_count
	// Value is written as in the config file ("256MiB", "7d", "false").
	Value string `json:"value,omitempty"`
	// Bytes is a size's value in bytes: JSON carries it as value_bytes,
	// an integer, as every size in the output is.
	Bytes  *int64 `json:"value_bytes,omitempty"`
	Source string `json:"source"`
}

// jsonSetting is a Setting as JSON has it: value or value_bytes.
type jsonSetting Setting

// MarshalJSON leaves out the text of a size, which value_bytes carries.
func (s Setting) MarshalJSON() ([]byte, error) {
	if s.Bytes != nil {
		s.Value = ""
	}
	return json.Marshal(jsonSetting(s))
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *Setting) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, (*jsonSetting)(s)) }

// source returns where the policy's value of key came from; "" = the
// built-in default.
func (p Policy) source(task, key string) string {
	for _, s := range p.Settings[task] {
		if s.Key == key {
			return s.Source
		}
	}
	return ""
}

// runs reports whether the runner attempts task on the table: enabled, or
// with table properties that cannot be honoured, so the attempt fails
// saying why instead of the task being quietly skipped or run without them.
func (p Policy) runs(t Task) bool { return p.Invalid[t.Name] != nil || t.Enabled(p) }

// disabledReason says why a task that is not enabled is skipped, naming the
// table property or config block that turned it off.
func (p Policy) disabledReason(t Task) string {
	src := p.source(t.Name, t.Name+".enabled")
	if src == "" {
		return t.disabled
	}
	return t.disabled + " by " + src
}
