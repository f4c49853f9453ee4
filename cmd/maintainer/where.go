package main

import (
	"errors"
	"fmt"
	"strings"
)

// whereFlag is run's and plan's --where. It tells a scope given blank, or
// given twice, from no scope at all: a CronJob's --where "$FILTER" with the
// variable unset, or a second --where that would silently replace the
// first, would otherwise compact more than the job asked for.
type whereFlag struct {
	value string
	times int
}

func (f *whereFlag) String() string { return f.value }
func (f *whereFlag) Type() string   { return "filter" }

func (f *whereFlag) Set(s string) error {
	f.times++
	f.value = s
	return nil
}

// filter returns the scope as given, or why it is refused.
func (f *whereFlag) filter() (string, error) {
	switch {
	case f.times > 1:
		return "", fmt.Errorf("given %d times; write one filter, joining the conditions with AND", f.times)
	case f.times == 1 && strings.TrimSpace(f.value) == "":
		return "", errors.New("is empty; leave it out to run without a scope")
	}
	return strings.TrimSpace(f.value), nil
}
