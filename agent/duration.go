package agent

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Duration is a time.Duration that a configuration file writes as text with a unit ("30s",
// "5m", "2h"). TOML has no duration type, and a bare number would be read as nanoseconds: a
// wall-time budget of 30 would end every run at once. Every package's Config uses this one
// type, so a duration reads and fails the same way wherever it is in the file.
type Duration time.Duration

// ErrDurationUnit is the error of a duration written as a bare number.
var ErrDurationUnit = errors.New(`a duration needs a unit, like "30s" or "5m"`)

// UnmarshalText reads a Go duration string such as "90s" or "1h30m". A bare number, even
// in quotes, and a negative duration are errors; "0" is zero.
func (d *Duration) UnmarshalText(b []byte) error {
	s := string(b)
	v, err := time.ParseDuration(s)
	if err != nil {
		if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
			return ErrDurationUnit
		}
		return fmt.Errorf("want a duration like \"30s\" or \"5m\", not %q", s)
	}
	if v < 0 {
		return fmt.Errorf("duration %q is negative", s)
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes the duration as Go prints it ("1m30s"), which UnmarshalText reads back.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// String is the duration as Go prints it.
func (d Duration) String() string { return time.Duration(d).String() }
