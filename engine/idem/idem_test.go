package idem_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/engine/idem"
	"github.com/svc/engine/events"
	evidem "github.com/svc/engine/events/idem"
)

type wrote struct{ N int }

func (wrote) Type() string { return "test.wrote.v1" }

func TestWrite(t *testing.T) {
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	env := func(key, digest string) commands.Envelope { return commands.Envelope{At: at, Key: key, Digest: digest} }
	ok := func() ([]events.Event, commands.Outcome, any, error) {
		return []events.Event{wrote{1}}, http.StatusCreated, map[string]any{"n": 1}, nil
	}
	refused := func() ([]events.Event, commands.Outcome, any, error) {
		return nil, 0, nil, commands.BadRequest("no")
	}
	rec := idem.Record{}
	rec.Apply(evidem.KeyUsed{Key: "used", Digest: "d1", Status: 201, Body: []byte(`{"n":1}`)})
	cases := []struct {
		name         string
		env          commands.Envelope
		decide       func() ([]events.Event, commands.Outcome, any, error)
		events       int
		replay       bool
		status       int
		code, answer string
	}{
		{"a new key commits the write and its answer", env("new", "d"), ok, 2, false, 0, "", `{"n":1}`},
		{"the same key and request replay the answer", env("used", "d1"), ok, 0, true, 201, "", `{"n":1}`},
		{"the same key with another request conflicts", env("used", "d2"), ok, 0, false, 409, "idempotency_conflict", ""},
		{"a refusal records nothing", env("new", "d"), refused, 0, false, 400, "invalid_request", ""},
		{"no key never commits", env("", ""), ok, 0, false, 0, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := idem.Write(rec, tc.env, tc.decide)
			var rp *commands.Replay
			var ref *commands.Refusal
			switch {
			case len(evs) != tc.events:
				t.Fatalf("%d events: %v (%v)", len(evs), evs, err)
			case tc.replay:
				if !errors.As(err, &rp) || rp.Status != tc.status || string(rp.Body) != tc.answer {
					t.Fatalf("replay %v", err)
				}
			case tc.code != "":
				if !errors.As(err, &ref) || commands.StatusOf(ref.Code, ref.Malformed) != tc.status || string(ref.Code) != tc.code {
					t.Fatalf("refusal %v", err)
				}
			case tc.env.Key == "":
				if !errors.Is(err, idem.ErrNoKey) {
					t.Fatalf("no key: %v", err)
				}
			default:
				u := evs[1].(evidem.KeyUsed)
				if err != nil || u.Key != "new" || u.Digest != "d" || u.Status != 201 || string(u.Body) != tc.answer || !u.At.Equal(at) {
					t.Fatalf("recorded %+v (%v)", u, err)
				}
			}
		})
	}
}
