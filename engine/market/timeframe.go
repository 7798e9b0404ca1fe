package market

import (
	"fmt"
	"strconv"
)

// Unit is a timeframe unit.
type Unit struct {
	Letter  byte   `json:"-"`
	Code    string `json:"unit"`
	Name    string `json:"name"`
	Seconds int64  `json:"seconds"`
	Max     int    `json:"max"` // the largest count served with this unit
}

// Units is the timeframe grammar's unit table with its per-unit ceilings.
// Buckets are aligned to the Unix epoch in UTC; weeks start on Monday.
var Units = []Unit{
	{Letter: 's', Code: "s", Name: "second", Seconds: 1, Max: 59},
	{Letter: 'm', Code: "m", Name: "minute", Seconds: 60, Max: 1439},
	{Letter: 'h', Code: "h", Name: "hour", Seconds: 3600, Max: 168},
	{Letter: 'd', Code: "d", Name: "day", Seconds: 86400, Max: 365},
	{Letter: 'w', Code: "w", Name: "week", Seconds: 7 * 86400, Max: 52},
}

// TimeframePattern is the grammar as a regular expression (D and W are
// accepted for d and w).
const TimeframePattern = `^[1-9][0-9]{0,3}(s|m|h|d|D|w|W)$`

// Timeframe is a bar width: N units.
type Timeframe struct {
	N    int
	Unit Unit
}

// TimeframeError explains why a timeframe is not served.
type TimeframeError struct {
	Input  string
	Reason string
}

func (e *TimeframeError) Error() string {
	return fmt.Sprintf("timeframe %q is not served: %s", e.Input, e.Reason)
}

// ParseTimeframe reads a timeframe such as "1m", "15m", "4h", "1d" or "1W".
// It never falls back to a default: anything unparseable is an error.
func ParseTimeframe(s string) (Timeframe, error) {
	bad := func(reason string) (Timeframe, error) { return Timeframe{}, &TimeframeError{Input: s, Reason: reason} }
	if len(s) < 2 || len(s) > 5 {
		return bad("write a count and a unit, e.g. 1m, 15m, 4h, 1d")
	}
	letter := s[len(s)-1]
	switch letter {
	case 'D':
		letter = 'd'
	case 'W':
		letter = 'w'
	case 'M':
		return bad("months are not served; use d or w")
	}
	digits := s[:len(s)-1]
	if digits[0] < '1' || digits[0] > '9' || !allDigits(digits) {
		return bad("the count must be a whole number from 1, without sign or leading zero")
	}
	n, err := strconv.Atoi(digits)
	if err != nil {
		return bad("the count is not a number")
	}
	for _, u := range Units {
		if u.Letter == letter {
			if n > u.Max {
				return bad(fmt.Sprintf("at most %d%s", u.Max, u.Code))
			}
			return Timeframe{N: n, Unit: u}, nil
		}
	}
	return bad("the unit must be one of s, m, h, d, w")
}

// String is the canonical form, e.g. "15m".
func (t Timeframe) String() string { return strconv.Itoa(t.N) + t.Unit.Code }

// Seconds is the bar width in seconds.
func (t Timeframe) Seconds() int64 { return int64(t.N) * t.Unit.Seconds }

// weekAnchor is Monday 1970-01-05 00:00 UTC.
const weekAnchor = 4 * 86400

// Bucket is the opening second of the bar that holds the Unix second sec.
func (t Timeframe) Bucket(sec int64) int64 {
	w := t.Seconds()
	var anchor int64
	if t.Unit.Letter == 'w' {
		anchor = weekAnchor
	}
	x := sec - anchor
	q := x / w
	if x%w < 0 {
		q--
	}
	return q*w + anchor
}

// Resolution is a stored base bar width.
type Resolution int

// Stored resolutions: every timeframe is aggregated from one of these.
const (
	Second Resolution = iota
	Minute
	Day
)

// Resolutions lists the stored resolutions.
var Resolutions = []Resolution{Second, Minute, Day}

// Seconds is the width of the resolution.
func (r Resolution) Seconds() int64 {
	switch r {
	case Second:
		return 1
	case Minute:
		return 60
	}
	return 86400
}

// String names the resolution: 1s, 1m, 1d.
func (r Resolution) String() string {
	switch r {
	case Second:
		return "1s"
	case Minute:
		return "1m"
	}
	return "1d"
}

// Base is the stored resolution a timeframe is aggregated from.
func (t Timeframe) Base() Resolution {
	switch t.Unit.Letter {
	case 's':
		return Second
	case 'm':
		return Minute
	case 'h':
		if t.N%24 == 0 {
			return Day
		}
		return Minute
	}
	return Day
}
