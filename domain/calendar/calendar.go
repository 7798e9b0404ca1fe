// Package calendar is the trading calendar the risk controls count periods in:
// when a trading day and a trading week start, when the day's session closes and
// when the next period starts. It is pure (a function of time and the embedded
// zone database), so the account aggregate may use it inside Decide and Apply.
//
//   - crypto: zone UTC. A trading day runs 00:00 to 24:00 UTC, every day; its
//     session closes at 24:00 UTC, which is the next day's start. A trading week
//     starts Monday 00:00 UTC.
//   - futures: zone America/Chicago (CME Globex). Trading day D runs from 17:00
//     Chicago time on the evening before D to its session close at 16:00 on D,
//     Monday to Friday; the next trading day starts at 17:00 (Sunday 17:00 after
//     a Friday). A trading week starts Sunday 17:00 Chicago time. Exchange
//     holidays are not modelled.
//
// A moment between a session close and the next start (the futures maintenance
// hour, a weekend) belongs to the trading day that closed.
package calendar

import (
	"time"
	_ "time/tzdata" // the futures zone must resolve on hosts without a zone database
)

// Names of the calendars.
const (
	Crypto  = "crypto"
	Futures = "futures"
)

// Period is one trading day or week.
type Period struct {
	Start time.Time // first moment of the period
	Close time.Time // session close (for a week: the last day's close)
	Next  time.Time // start of the next period; Start <= t < Next for every t in the period
}

var chicago = mustZone("America/Chicago")

func mustZone(name string) *time.Location {
	l, err := time.LoadLocation(name)
	if err != nil {
		panic("calendar: " + err.Error())
	}
	return l
}

// Valid reports whether name is a known calendar.
func Valid(name string) bool { return name == Crypto || name == Futures }

// Day is the trading day containing t in calendar name (crypto when unknown).
func Day(name string, t time.Time) Period {
	if name == Futures {
		return futuresDay(t)
	}
	u := t.UTC()
	start := time.Date(u.Year(), u.Month(), u.Day(), 0, 0, 0, 0, time.UTC)
	next := start.AddDate(0, 0, 1)
	return Period{Start: start, Close: next, Next: next}
}

// Week is the trading week containing t in calendar name (crypto when unknown).
func Week(name string, t time.Time) Period {
	if name == Futures {
		c := t.In(chicago)
		// The latest Sunday 17:00 at or before t.
		back := int(c.Weekday()) // days since Sunday
		start := at17(c.AddDate(0, 0, -back))
		if start.After(t) {
			start = at17(c.AddDate(0, 0, -back-7))
		}
		next := at17(start.In(chicago).AddDate(0, 0, 7))
		fri := start.In(chicago).AddDate(0, 0, 5)
		closeAt := time.Date(fri.Year(), fri.Month(), fri.Day(), 16, 0, 0, 0, chicago)
		return Period{Start: start.UTC(), Close: closeAt.UTC(), Next: next.UTC()}
	}
	u := t.UTC()
	back := (int(u.Weekday()) + 6) % 7 // days since Monday
	start := time.Date(u.Year(), u.Month(), u.Day()-back, 0, 0, 0, 0, time.UTC)
	next := start.AddDate(0, 0, 7)
	return Period{Start: start, Close: next, Next: next}
}

// at17 is 17:00 Chicago time on c's calendar date.
func at17(c time.Time) time.Time {
	return time.Date(c.Year(), c.Month(), c.Day(), 17, 0, 0, 0, chicago)
}

// opensAt reports whether a trading day starts at 17:00 on weekday w (Sunday to Thursday).
func opensAt(w time.Weekday) bool { return w != time.Friday && w != time.Saturday }

func futuresDay(t time.Time) Period {
	c := t.In(chicago)
	// The latest 17:00 on a Sunday..Thursday at or before t.
	start := at17(c)
	for start.After(t) || !opensAt(start.Weekday()) {
		d := start.AddDate(0, 0, -1)
		start = at17(d)
	}
	closeDay := start.AddDate(0, 0, 1)
	closeAt := time.Date(closeDay.Year(), closeDay.Month(), closeDay.Day(), 16, 0, 0, 0, chicago)
	next := at17(closeDay)
	for !opensAt(next.Weekday()) {
		next = at17(next.AddDate(0, 0, 1))
	}
	return Period{Start: start.UTC(), Close: closeAt.UTC(), Next: next.UTC()}
}
