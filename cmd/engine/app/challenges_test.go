package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/cmd/engine/app/apptest"
	challengecmd "github.com/svc/engine/commands/challenge"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/events"
	evch "github.com/svc/engine/events/challenge"
)

// midweek is the clock, moved on to the next Monday noon (UTC) from Friday
// noon to Sunday's end: the sample programs refuse weekend holds, and a suite
// run on a Saturday saw its orders refused with risk_locked (weekend_hold).
// It moves forward, never back, so what the engine dates by it (sessions,
// keys) is never already past by the real clock.
func midweek() func() time.Time {
	now := time.Now().UTC()
	var shift time.Duration
	if wd := now.Weekday(); wd == time.Saturday || wd == time.Sunday || wd == time.Friday && now.Hour() >= 12 {
		days := (int(time.Monday) - int(wd) + 7) % 7
		monday := time.Date(now.Year(), now.Month(), now.Day()+days, 12, 0, 0, 0, time.UTC)
		shift = monday.Sub(now)
	}
	return func() time.Time { return time.Now().Add(shift) }
}

// challengeRoutes are the challenge area's routes, one request each.
func challengeRoutes() []apptest.Req {
	return []apptest.Req{
		{Method: http.MethodGet, Path: "/api/challenges"},
		{Method: http.MethodPut, Path: "/api/challenges/" + app.SampleStage1, Body: map[string]any{}, Headers: map[string]string{"Idempotency-Key": "k1"}},
		{Method: http.MethodPost, Path: "/api/enrollments", Body: map[string]any{}, Headers: map[string]string{"Idempotency-Key": "k1"}},
		{Method: http.MethodGet, Path: "/api/enrollments/events?id=enr_1"},
		{Method: http.MethodGet, Path: "/api/enrollments"},
		{Method: http.MethodPost, Path: "/api/enrollments/reset", Body: map[string]any{}, Headers: map[string]string{"Idempotency-Key": "k1"}},
	}
}

// Without CHALLENGES_ENABLED every challenge route answers 404 as an unknown
// route does, to a session, a key and no credential alike.
func TestChallengesDisabledAnswer404(t *testing.T) {
	e := apptest.Start(t, apptest.Options{})
	cookie := e.SignIn("off@example.com", "correct horse battery")
	// An unknown route's answer (read without the OpenAPI check: no document names it).
	resp, err := http.Get(e.URL + "/api/no-such-route")
	if err != nil {
		t.Fatal(err)
	}
	var unknown map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&unknown); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown route: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	want := unknown["error"]
	for _, r := range challengeRoutes() {
		for name, resp := range map[string]*apptest.Resp{
			"session": e.AsSession(cookie, r),
			"key":     e.Do(r),
			"nothing": e.Do(apptest.Req{Method: r.Method, Path: r.Path, Body: r.Body, Headers: r.Headers, Key: "-"}),
		} {
			if m := resp.Map(t); resp.Status != http.StatusNotFound || m["error"] != want || m["code"] != unknown["code"] || len(m) != len(unknown) {
				t.Errorf("%s %s (%s): %d %s, want 404 as an unknown route", r.Method, r.Path, name, resp.Status, resp.Body)
			}
		}
	}
}

func enabled(c *app.Config) { c.Challenges = true }

func TestChallengesLifecycleOverHTTP(t *testing.T) {
	e := apptest.Start(t, apptest.Options{Configure: enabled, Now: midweek()})
	trader := e.SignIn("trader@example.com", "correct horse battery")
	as := func(cookie, method, path string, body any, key string) *apptest.Resp {
		t.Helper()
		r := apptest.Req{Method: method, Path: path, Body: body}
		if key != "" {
			r.Headers = map[string]string{"Idempotency-Key": key}
		}
		return e.AsSession(cookie, r)
	}
	code := func(r *apptest.Resp) string { m := r.Map(t); s, _ := m["code"].(string); return s }

	// Keys never reach the area; a session does.
	for _, r := range challengeRoutes() {
		if got := e.Do(r); got.Status != http.StatusForbidden {
			t.Errorf("%s %s with a key: %d %s", r.Method, r.Path, got.Status, got.Body)
		}
	}
	list := as(trader, http.MethodGet, "/api/challenges", nil, "")
	if list.Status != http.StatusOK {
		t.Fatalf("list: %d %s", list.Status, list.Body)
	}
	progs := list.Map(t)["challenges"].([]any)
	if len(progs) != 3 {
		t.Fatalf("the sandbox ships 3 sample programs, listed %d: %s", len(progs), list.Body)
	}
	first := progs[0].(map[string]any)
	if first["id"] != app.SampleStage1 || first["nextChallengeId"] != app.SampleStage2 || first["priceCents"] != float64(0) || len(first) != 18 {
		t.Fatalf("first stage %v", first)
	}

	// Authoring: the demo venue's operator writes a draft; a trader may not.
	venueID, _ := e.Creds["venueId"].(string)
	operator, _ := e.Creds["operatorSession"].(string)
	draftID := "0b5c7a3e-1111-4222-8333-444455556666"
	draft := map[string]any{"venueId": venueID, "name": "Draft", "description": "not yet", "isActive": false, "stage": 1,
		"allowedTypes": []string{"standard"}, "accountSizes": []any{5000}, "currency": "USD", "priceCents": 0,
		"profitTargetPct": 8, "maxDailyDdPct": 4, "maxTotalDdPct": 8, "ddMode": "static", "minTradingDays": 1,
		"maxDurationDays": nil, "allowWeekendHold": true, "profitSharePct": nil}
	if r := as(operator, http.MethodPut, "/api/challenges/"+draftID, draft, "draft-1"); r.Status != http.StatusCreated {
		t.Fatalf("author: %d %s", r.Status, r.Body)
	}
	if r := as(operator, http.MethodPut, "/api/challenges/"+draftID, draft, "draft-1"); r.Status != http.StatusCreated || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("author again: %d %s", r.Status, r.Body)
	}
	draft["name"] = "Other"
	if r := as(operator, http.MethodPut, "/api/challenges/"+draftID, draft, "draft-1"); r.Status != http.StatusConflict {
		t.Fatalf("the key with another body: %d %s", r.Status, r.Body)
	}
	if r := as(trader, http.MethodPut, "/api/challenges/"+draftID, draft, "draft-2"); r.Status != http.StatusForbidden {
		t.Fatalf("a trader authors: %d %s", r.Status, r.Body)
	}
	draft["maxDailyDdPct"] = 101
	if r := as(operator, http.MethodPut, "/api/challenges/"+draftID, draft, "draft-3"); r.Status != http.StatusBadRequest || r.Map(t)["params"].(map[string]any)["field"] != "maxDailyDdPct" {
		t.Fatalf("a percentage over 100: %d %s", r.Status, r.Body)
	}
	if r := as(operator, http.MethodPut, "/api/challenges/"+draftID, nil, ""); r.Status != http.StatusBadRequest || code(r) != "idempotency_key_required" {
		t.Fatalf("no key: %d %s", r.Status, r.Body)
	}
	if n := len(as(trader, http.MethodGet, "/api/challenges", nil, "").Map(t)["challenges"].([]any)); n != 3 {
		t.Fatalf("a draft is listed: %d programs", n)
	}

	// Enrollment: 402 for a priced program, 201 for the free first stage, 409 while it is in flight.
	// A refusal records nothing in the trader's enrollments.
	subject := evch.EnrollmentSubject(tenantcmd.UserID("trader@example.com"))
	if n := len(e.Commits(subject)); n != 0 {
		t.Fatalf("%d enrollment commits before any enrollment", n)
	}
	if r := as(trader, http.MethodPost, "/api/enrollments", map[string]any{"challengeId": app.SamplePriced, "accountSize": 10000}, "e-priced"); r.Status != http.StatusPaymentRequired || code(r) != "payment_required" {
		t.Fatalf("priced: %d %s", r.Status, r.Body)
	}
	if r := as(trader, http.MethodPost, "/api/enrollments", map[string]any{"challengeId": app.SampleStage1, "accountSize": 12345}, "e-size"); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("a size not offered: %d %s", r.Status, r.Body)
	}
	if n := len(e.Commits(subject)); n != 0 {
		t.Fatalf("refused enrollments recorded %d commits", n)
	}
	body := map[string]any{"challengeId": app.SampleStage1, "accountSize": 10000, "accountType": "standard"}
	r := as(trader, http.MethodPost, "/api/enrollments", body, "e-1")
	if r.Status != http.StatusCreated {
		t.Fatalf("enroll: %d %s", r.Status, r.Body)
	}
	en := r.Map(t)["enrollment"].(map[string]any)
	if en["status"] != "registered" || en["stage"] != float64(1) {
		t.Fatalf("enrollment %v", en)
	}
	enID, accountID := en["id"].(string), en["accountId"].(string)
	if again := as(trader, http.MethodPost, "/api/enrollments", body, "e-1"); again.Status != http.StatusCreated || string(again.Body) != string(r.Body) {
		t.Fatalf("the same key again: %d %s", again.Status, again.Body)
	}
	if r := as(trader, http.MethodPost, "/api/enrollments", body, "e-2"); r.Status != http.StatusConflict || code(r) != "enrollment_in_flight" {
		t.Fatalf("a second enrollment in flight: %d %s", r.Status, r.Body)
	}
	if n := len(e.Commits(subject)); n != 1 {
		t.Fatalf("one enrollment, a replay and a refusal recorded %d commits", n)
	}
	if mine := as(trader, http.MethodGet, "/api/enrollments", nil, "").Map(t)["enrollments"].([]any); len(mine) != 1 || mine[0].(map[string]any)["id"] != enID {
		t.Fatalf("my enrollments %v", mine)
	}
	history := func(cookie, id string) *apptest.Resp {
		return as(cookie, http.MethodGet, "/api/enrollments/events?id="+url.QueryEscape(id), nil, "")
	}
	rows := func() []any { return history(trader, enID).Map(t)["events"].([]any) }
	if got := rows(); len(got) != 1 || got[0].(map[string]any)["status"] != "registered" {
		t.Fatalf("history %v", got)
	}
	other := e.SignIn("other@example.com", "correct horse battery")
	if r := history(other, enID); r.Status != http.StatusNotFound {
		t.Fatalf("another user's enrollment: %d %s", r.Status, r.Body)
	}
	if mine := as(other, http.MethodGet, "/api/enrollments", nil, "").Map(t)["enrollments"].([]any); len(mine) != 0 {
		t.Fatalf("another user lists %v", mine)
	}
	if r := history(trader, "enr_nonexistent"); r.Status != http.StatusNotFound {
		t.Fatalf("no such enrollment: %d %s", r.Status, r.Body)
	}

	// The account trades with the trader's key: the first fill makes it in_progress.
	k := as(trader, http.MethodPost, "/api/keys", map[string]any{"name": "challenge"}, "")
	if k.Status != http.StatusCreated {
		t.Fatalf("key: %d %s", k.Status, k.Body)
	}
	key := k.Map(t)["secret"].(string)
	accts := e.Do(apptest.Req{Method: http.MethodGet, Path: "/api/account/list", Key: key}).Map(t)["accounts"].([]any)
	number := ""
	for _, a := range accts {
		if a := a.(map[string]any); a["accountId"] == accountID {
			number, _ = a["accountNumber"].(string)
		}
	}
	if number == "" {
		t.Fatalf("the challenge account is not listed: %v", accts)
	}
	place := func(id string) *apptest.Resp {
		return e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/trading/order?account=" + number, Key: key,
			Body: map[string]any{"clientOrderId": id, "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "0.01"}})
	}
	if r := place("c-1"); r.Status != http.StatusOK {
		t.Fatalf("order: %d %s", r.Status, r.Body)
	}
	apptest.WaitFor(t, 5*time.Second, func() error {
		if got := rows(); len(got) != 2 || got[1].(map[string]any)["status"] != "in_progress" || got[1].(map[string]any)["actor"] != "system" {
			return fmt.Errorf("history %v", got)
		}
		return nil
	})

	// A mark under the daily floor fails it: eval_breach, and only additions are refused.
	crash := trading.Market{Quotes: map[string]trading.Quote{"BTC-PERP": {Instrument: "BTC-PERP", Bid: events.Int(1), Ask: events.Int(1), At: time.Now()}}}
	eng := e.App.Engine
	if _, err := eng.Account(context.Background(), accountID, eng.Envelope(events.Principal{System: "test"}, "", &challengecmd.EvaluateStage{Market: crash})); err != nil {
		t.Fatal(err)
	}
	apptest.WaitFor(t, 5*time.Second, func() error {
		got := rows()
		if len(got) != 3 || got[2].(map[string]any)["status"] != "failed" || got[2].(map[string]any)["reason"] != "max_daily_drawdown" {
			return fmt.Errorf("history %v", got)
		}
		return nil
	})
	if r := place("c-2"); r.Status != http.StatusLocked || code(r) != "risk_locked" {
		t.Fatalf("an addition after the breach: %d %s", r.Status, r.Body)
	}
	unlock := e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/risk/unlock?broker=paper&account=" + number, Key: key})
	if unlock.Status != http.StatusOK {
		t.Fatalf("unlock: %d %s", unlock.Status, unlock.Body)
	}
	if lock := unlock.Map(t)["lock"].(map[string]any); lock["lockReason"] != "eval_breach" || lock["tradingLocked"] != true {
		t.Fatalf("the unlock cleared the breach: %v", lock)
	}
	// The lifecycle releases it: a reset of the failed (free) stage restarts it on the same account.
	if r := as(trader, http.MethodPost, "/api/enrollments/reset", map[string]any{"enrollmentId": "enr_nonexistent"}, "r-0"); r.Status != http.StatusNotFound {
		t.Fatalf("reset of no enrollment: %d %s", r.Status, r.Body)
	}
	reset := as(trader, http.MethodPost, "/api/enrollments/reset", map[string]any{"enrollmentId": enID}, "r-1")
	if reset.Status != http.StatusOK {
		t.Fatalf("reset: %d %s", reset.Status, reset.Body)
	}
	if again := as(trader, http.MethodPost, "/api/enrollments/reset", map[string]any{"enrollmentId": enID}, "r-1"); again.Status != http.StatusOK || string(again.Body) != string(reset.Body) {
		t.Fatalf("the same reset again: %d %s", again.Status, again.Body)
	}
	if r := as(trader, http.MethodPost, "/api/enrollments/reset", map[string]any{"enrollmentId": enID}, "r-2"); r.Status != http.StatusConflict || code(r) != "enrollment_not_failed" {
		t.Fatalf("a reset of a live enrollment: %d %s", r.Status, r.Body)
	}
	lock := e.Do(apptest.Req{Method: http.MethodGet, Path: "/api/risk?broker=paper&account=" + number, Key: key}).Map(t)["lock"].(map[string]any)
	if lock["tradingLocked"] != false || lock["lockReason"] != nil {
		t.Fatalf("the reset left the lock: %v", lock)
	}
	if r := place("c-3"); r.Status != http.StatusOK {
		t.Fatalf("an order after the reset: %d %s", r.Status, r.Body)
	}
	apptest.WaitFor(t, 5*time.Second, func() error {
		got := rows()
		if len(got) != 5 || got[3].(map[string]any)["reason"] != "reset" || got[4].(map[string]any)["status"] != "in_progress" {
			return fmt.Errorf("history %v", got)
		}
		return nil
	})
	if r := as(trader, http.MethodPost, "/api/enrollments", body, "e-3"); r.Status != http.StatusConflict {
		t.Fatalf("enroll while the reset one is in flight: %d %s", r.Status, r.Body)
	}
}

// A passed stage issues the next stage's account (a new account of the
// trader, bound to the next program's rules); the last stage passed
// completes the enrollment, which is then no longer in flight.
func TestChallengeChainPassesStageByStage(t *testing.T) {
	e := apptest.Start(t, apptest.Options{Configure: enabled, Now: midweek()})
	venueID, _ := e.Creds["venueId"].(string)
	operator, _ := e.Creds["operatorSession"].(string)
	trader := e.SignIn("chain@example.com", "correct horse battery")
	const one, two = "7a000000-0000-4000-8000-000000000001", "7a000000-0000-4000-8000-000000000002"
	program := func(id string, stage int, next any) map[string]any {
		return map[string]any{"venueId": venueID, "name": fmt.Sprintf("Quick %d", stage), "description": "", "isActive": true, "stage": stage,
			"nextChallengeId": next, "allowedTypes": []string{"standard"}, "accountSizes": []any{10000}, "currency": "USD", "priceCents": 0,
			"profitTargetPct": 1, "maxDailyDdPct": 5, "maxTotalDdPct": 10, "ddMode": "trailing_max_equity_eod", "minTradingDays": 0,
			"maxDurationDays": 30, "allowWeekendHold": true, "profitSharePct": 80}
	}
	for i, p := range []map[string]any{program(one, 1, two), program(two, 2, nil)} {
		id := []string{one, two}[i]
		if r := e.AsSession(operator, apptest.Req{Method: http.MethodPut, Path: "/api/challenges/" + id, Body: p, Headers: map[string]string{"Idempotency-Key": "q" + id}}); r.Status != http.StatusCreated {
			t.Fatalf("author %s: %d %s", id, r.Status, r.Body)
		}
	}
	r := e.AsSession(trader, apptest.Req{Method: http.MethodPost, Path: "/api/enrollments", Body: map[string]any{"challengeId": one, "accountSize": 10000},
		Headers: map[string]string{"Idempotency-Key": "chain-1"}})
	if r.Status != http.StatusCreated {
		t.Fatalf("enroll: %d %s", r.Status, r.Body)
	}
	en := r.Map(t)["enrollment"].(map[string]any)
	enID, first := en["id"].(string), en["accountId"].(string)
	eng := e.App.Engine
	at := func(px int64) *challengecmd.EvaluateStage {
		return &challengecmd.EvaluateStage{Market: trading.Market{Quotes: map[string]trading.Quote{"BTC-PERP": {Instrument: "BTC-PERP", Bid: events.Int(px), Ask: events.Int(px), At: time.Now()}}}}
	}
	// Hold a position bought at 100 on the paper book, then mark it 200: 1% of 10,000 is 100 of profit.
	buy := &trading.PlaceOrder{ClientOrderID: "q1", Instrument: "BTC-PERP", Side: "buy", OrderType: "market", Quantity: events.Int(1), TimeInForce: "ioc"}
	ctx := context.Background()
	passStage := func(accountID string) {
		t.Helper()
		env := eng.Envelope(events.Principal{System: "test"}, "", buy)
		if _, err := eng.Account(ctx, accountID, env); err != nil {
			t.Fatalf("buy on %s: %v", accountID, err)
		}
		var mark int64
		if err := eng.InspectAccount(ctx, accountID, func(s *account.State, _ uint64) { p := s.Positions["BTC-PERP"]; mark = p.AvgPrice.Apd().Coeff.Int64() }); err != nil {
			t.Fatal(err)
		}
		if _, err := eng.Account(ctx, accountID, eng.Envelope(events.Principal{System: "test"}, "", at(mark*2+200))); err != nil {
			t.Fatal(err)
		}
	}
	passStage(first)
	rows := func() []any {
		return e.AsSession(trader, apptest.Req{Method: http.MethodGet, Path: "/api/enrollments/events?id=" + enID}).Map(t)["events"].([]any)
	}
	statuses := func() string {
		var out []string
		for _, r := range rows() {
			out = append(out, r.(map[string]any)["status"].(string))
		}
		return fmt.Sprint(out)
	}
	apptest.WaitFor(t, 5*time.Second, func() error {
		if got := statuses(); got != "[registered in_progress passed registered]" {
			return fmt.Errorf("history %s", got)
		}
		return nil
	})
	second := engine.StageAccountID(enID, 2)
	apptest.WaitFor(t, 5*time.Second, func() error {
		var bound bool
		var stage int64
		err := eng.InspectAccount(ctx, second, func(s *account.State, _ uint64) { bound, stage = s.Eval.Bound, s.Eval.Rules.Stage })
		if err != nil || !bound || stage != 2 {
			return fmt.Errorf("stage 2 account: bound %v stage %d %v", bound, stage, err)
		}
		return nil
	})
	passStage(second)
	apptest.WaitFor(t, 5*time.Second, func() error {
		if got := statuses(); got != "[registered in_progress passed registered in_progress passed completed]" {
			return fmt.Errorf("history %s", got)
		}
		return nil
	})
	if r := e.AsSession(trader, apptest.Req{Method: http.MethodPost, Path: "/api/enrollments", Body: map[string]any{"challengeId": one, "accountSize": 10000},
		Headers: map[string]string{"Idempotency-Key": "chain-2"}}); r.Status != http.StatusCreated {
		t.Fatalf("enroll after completing: %d %s", r.Status, r.Body)
	}

	// A restart replays the log to the same verdicts: the history is the
	// same, once (sending the verdicts on again at start records nothing).
	before := statuses()
	subject := evch.EnrollmentSubject(tenantcmd.UserID("chain@example.com"))
	commits := len(e.Commits(subject))
	var done string
	if err := eng.InspectAccount(ctx, second, func(s *account.State, _ uint64) { done = s.Eval.Done }); err != nil {
		t.Fatal(err)
	}
	e = e.Restart()
	eng = e.App.Engine
	eng.WaitResent() // the start's resend of the verdicts has run
	if n := len(e.Commits(subject)); n != commits {
		t.Fatalf("the restart recorded %d enrollment commits more", n-commits)
	}
	if got := statuses(); got != before {
		t.Fatalf("after a restart the history is %s, was %s", got, before)
	}
	var again string
	if err := eng.InspectAccount(ctx, second, func(s *account.State, _ uint64) { again = s.Eval.Done }); err != nil || again != done {
		t.Fatalf("after a restart stage 2 is %q, was %q (%v)", again, done, err)
	}
}
