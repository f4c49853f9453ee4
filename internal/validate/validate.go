// Package validate holds the error type components use to report a bad
// setting, so that the config loader can point at the line that set it.
package validate

import (
	"errors"
	"fmt"
)

// FieldError names the config field that a validation problem is about.
type FieldError struct {
	Field string // snake_case key inside the task block, e.g. "min_input_files"
	Value any
	Msg   string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s: %s (got %v)", e.Field, e.Msg, e.Value)
}

// Collector gathers every problem of one Validate call.
type Collector struct{ errs []error }

// Add records a problem with field set to value.
func (c *Collector) Add(field string, value any, msg string) {
	c.errs = append(c.errs, &FieldError{Field: field, Value: value, Msg: msg})
}

// Err joins the problems, or is nil when there are none.
func (c *Collector) Err() error { return errors.Join(c.errs...) }
