package calendar

import (
	"testing"
	"time"
)

func ct(s string) time.Time {
	t, err := time.ParseInLocation("2006-01-02 15:04", s, chicago)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func utc(s string) time.Time {
	t, err := time.Parse("2006-01-02 15:04", s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestPeriods(t *testing.T) {
	cases := []struct {
		name, cal string
		at        time.Time
		week      bool
		want      Period
	}{
		{"crypto midday", Crypto, utc("2026-11-04 13:30"), false, Period{utc("2026-11-04 00:00"), utc("2026-11-05 00:00"), utc("2026-11-05 00:00")}},
		{"crypto midnight starts a day", Crypto, utc("2026-11-05 00:00"), false, Period{utc("2026-11-05 00:00"), utc("2026-11-06 00:00"), utc("2026-11-06 00:00")}},
		{"crypto week from a Sunday", Crypto, utc("2026-11-08 23:59"), true, Period{utc("2026-11-02 00:00"), utc("2026-11-09 00:00"), utc("2026-11-09 00:00")}},
		{"crypto week on Monday", Crypto, utc("2026-11-09 00:00"), true, Period{utc("2026-11-09 00:00"), utc("2026-11-16 00:00"), utc("2026-11-16 00:00")}},
		{"futures evening belongs to the next day", Futures, ct("2026-11-03 18:00"), false, Period{ct("2026-11-03 17:00"), ct("2026-11-04 16:00"), ct("2026-11-04 17:00")}},
		{"futures morning", Futures, ct("2026-11-04 09:00"), false, Period{ct("2026-11-03 17:00"), ct("2026-11-04 16:00"), ct("2026-11-04 17:00")}},
		{"futures maintenance hour", Futures, ct("2026-11-04 16:30"), false, Period{ct("2026-11-03 17:00"), ct("2026-11-04 16:00"), ct("2026-11-04 17:00")}},
		{"futures Friday rolls to Sunday", Futures, ct("2026-11-06 10:00"), false, Period{ct("2026-11-05 17:00"), ct("2026-11-06 16:00"), ct("2026-11-08 17:00")}},
		{"futures Saturday is Friday's", Futures, ct("2026-11-07 12:00"), false, Period{ct("2026-11-05 17:00"), ct("2026-11-06 16:00"), ct("2026-11-08 17:00")}},
		{"futures Sunday evening opens Monday", Futures, ct("2026-11-08 17:00"), false, Period{ct("2026-11-08 17:00"), ct("2026-11-09 16:00"), ct("2026-11-09 17:00")}},
		{"futures DST change (Nov 1 2026)", Futures, ct("2026-11-01 20:00"), false, Period{ct("2026-11-01 17:00"), ct("2026-11-02 16:00"), ct("2026-11-02 17:00")}},
		{"futures week", Futures, ct("2026-11-04 09:00"), true, Period{ct("2026-11-01 17:00"), ct("2026-11-06 16:00"), ct("2026-11-08 17:00")}},
		{"futures week on Sunday before open", Futures, ct("2026-11-08 16:59"), true, Period{ct("2026-11-01 17:00"), ct("2026-11-06 16:00"), ct("2026-11-08 17:00")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Day(c.cal, c.at)
			if c.week {
				got = Week(c.cal, c.at)
			}
			if !got.Start.Equal(c.want.Start) || !got.Close.Equal(c.want.Close) || !got.Next.Equal(c.want.Next) {
				t.Fatalf("got %v / %v / %v, want %v / %v / %v", got.Start, got.Close, got.Next, c.want.Start, c.want.Close, c.want.Next)
			}
			if got.Start.After(c.at) || !got.Next.After(c.at) {
				t.Fatalf("%v not inside %v..%v", c.at, got.Start, got.Next)
			}
		})
	}
}

func TestEveryMomentInsideItsPeriod(t *testing.T) {
	for _, cal := range []string{Crypto, Futures} {
		for at := utc("2026-03-01 00:00"); at.Before(utc("2026-04-15 00:00")); at = at.Add(37 * time.Minute) {
			d, w := Day(cal, at), Week(cal, at)
			if d.Start.After(at) || !d.Next.After(at) || d.Close.Before(d.Start) || d.Close.After(d.Next) {
				t.Fatalf("%s day of %v: %+v", cal, at, d)
			}
			if w.Start.After(at) || !w.Next.After(at) || w.Start.After(d.Start) && !w.Start.Equal(d.Start) && w.Start.After(at) {
				t.Fatalf("%s week of %v: %+v", cal, at, w)
			}
			if n := Day(cal, d.Next); !n.Start.Equal(d.Next) {
				t.Fatalf("%s: next day of %v starts %v, want %v", cal, at, n.Start, d.Next)
			}
		}
	}
}
