package risk_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/app/apptest"
	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/events"
)

// clock is the injected engine clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func quote(e *apptest.Env, bid, ask string) {
	e.App.Sim.Publish(market.Quote{Instrument: "BTC-PERP", Bid: events.MustDecimal(bid), Ask: events.MustDecimal(ask), Last: events.MustDecimal(bid), At: time.Now()})
}

func order(id, side, qty string, extra ...any) map[string]any {
	m := map[string]any{"clientOrderId": id, "instrument": "BTC-PERP", "side": side, "orderType": "market", "quantity": qty}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	return m
}

func status(t *testing.T, r *apptest.Resp, want int, code string) map[string]any {
	t.Helper()
	if r.Status != want {
		t.Fatalf("status %d, want %d: %s", r.Status, want, r.Body)
	}
	m := r.Map(t)
	if want >= 400 && (m["error"] == nil || m["error"] == "") {
		t.Fatalf("no error: %s", r.Body)
	}
	if code != "" && m["code"] != code {
		t.Fatalf("code %v, want %s: %s", m["code"], code, r.Body)
	}
	return m
}

func lock(t *testing.T, e *apptest.Env) map[string]any {
	t.Helper()
	return status(t, e.Get("/api/risk?broker=paper"), 200, "")["lock"].(map[string]any)
}

func put(e *apptest.Env, body any) *apptest.Resp {
	return e.Do(apptest.Req{Method: http.MethodPut, Path: "/api/risk?broker=paper", Body: body})
}

func positions(t *testing.T, e *apptest.Env) []any {
	var f struct {
		Positions []any `json:"positions"`
	}
	e.Get("/api/account/snapshot").JSON(t, &f)
	return f.Positions
}

func fills(t *testing.T, e *apptest.Env) int {
	return len(e.Get("/api/account/fills").Map(t)["fills"].([]any))
}

// Scenario per control: an injected clock and scripted marks cross it; it fires
// once, flattens, refuses a new buy with 423, survives a restart, and lifts by
// itself at the next period's start.
func TestControlScenarios(t *testing.T) {
	monday := time.Date(2026, 11, 2, 14, 0, 0, 0, time.UTC)
	nextDay, nextWeek := time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 9, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name     string
		settings map[string]any
		start    time.Time
		cross    func(e *apptest.Env, c *clock) // after a buy of 2 at 101
		reason   string
		unlockAt time.Time
	}{
		{"daily loss limit", map[string]any{"dailyLossEnabled": true, "dailyLossValue": 100}, monday,
			func(e *apptest.Env, _ *clock) { quote(e, "60", "61"); quote(e, "40", "41") }, "daily_loss_limit", nextDay},
		{"weekly loss limit", map[string]any{"weeklyLossEnabled": true, "weeklyLossValue": 100.5}, monday,
			func(e *apptest.Env, _ *clock) { quote(e, "40", "41") }, "weekly_loss_limit", nextWeek},
		{"daily profit target", map[string]any{"dailyProfitEnabled": true, "dailyProfitValue": 100}, monday,
			func(e *apptest.Env, _ *clock) { quote(e, "150", "152") }, "daily_profit_target", nextDay},
		{"weekly profit target", map[string]any{"weeklyProfitEnabled": true, "weeklyProfitValue": 100}, monday,
			func(e *apptest.Env, _ *clock) { quote(e, "150", "152") }, "weekly_profit_target", nextWeek},
		{"end-of-day close", map[string]any{"eodCloseEnabled": true, "eodCloseValue": 15}, monday.Add(9*time.Hour + 44*time.Minute),
			func(_ *apptest.Env, c *clock) { c.Set(time.Date(2026, 11, 2, 23, 45, 0, 0, time.UTC)) }, "eod_close", nextDay},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := &clock{t: tc.start}
			e := apptest.Start(t, apptest.Options{Now: clk.Now, ManualFeed: true})
			quote(e, "100", "101")
			l := status(t, put(e, tc.settings), 200, "")["lock"].(map[string]any)
			if l["monitoring"] != "live" || l["tradingLocked"] != false || l["settings"].(map[string]any)["updatedAt"].(float64) != float64(tc.start.Unix()) {
				t.Fatalf("after put: %v", l)
			}
			status(t, e.Post("/api/trading/order", order("b1", "buy", "2")), 200, "")
			tc.cross(e, clk)
			// The lock reads the account's live state; positions read the
			// read models, which follow the same commit a moment later.
			apptest.WaitFor(t, 5*time.Second, func() error {
				if lock(t, e)["tradingLocked"] != true {
					return fmt.Errorf("not locked yet")
				}
				if n := len(positions(t, e)); n != 0 {
					return fmt.Errorf("%d positions still shown", n)
				}
				return nil
			})
			l = lock(t, e)
			if l["lockReason"] != tc.reason || l["tradingUnlockAt"] != tc.unlockAt.Format(time.RFC3339) || l["flattenConfirmed"] != true {
				t.Fatalf("lock %v", l)
			}
			if tc.reason != "eod_close" && l["triggerPnl"] == nil {
				t.Fatalf("no triggerPnl: %v", l)
			}
			if len(positions(t, e)) != 0 {
				t.Fatal("positions not flat")
			}
			n := fills(t, e) // the buy and the closing sell
			tc.cross(e, clk)
			quote(e, "30", "31")
			quote(e, "200", "201")
			m := status(t, e.Post("/api/trading/order", order("b2", "buy", "1")), 423, "risk_locked")
			if hs := m["params"].(map[string]any)["holds"].([]any); len(hs) != 1 || hs[0] != tc.reason {
				t.Fatalf("holds %v", m["params"])
			}
			adv := status(t, e.Get("/api/trading/actions?instrument=BTC-PERP&side=buy&quantity=1"), 200, "")
			if adv["allowed"] != false || adv["refusals"].([]any)[0].(map[string]any)["code"] != "risk_locked" {
				t.Fatalf("actions %v", adv)
			}
			adv = status(t, e.Get("/api/trading/actions?instrument=BTC-PERP&side=sell&quantity=1&reduceOnly=true"), 200, "")
			if rs := adv["refusals"].([]any); len(rs) != 1 || rs[0].(map[string]any)["code"] != "position_not_closable" {
				t.Fatalf("a reduce-only sell meets the hold: %v", adv)
			}
			if fills(t, e) != n {
				t.Fatal("the control fired twice")
			}

			e = e.Restart()
			if l := lock(t, e); l["tradingLocked"] != true || l["lockReason"] != tc.reason {
				t.Fatalf("after restart: %v", l)
			}
			status(t, e.Post("/api/trading/order", order("b3", "buy", "1")), 423, "risk_locked")

			clk.Set(tc.unlockAt)
			if l := lock(t, e); l["tradingLocked"] != false || l["lockReason"] != nil {
				t.Fatalf("at tradingUnlockAt: %v", l)
			}
			status(t, e.Post("/api/trading/order", order("b4", "buy", "1")), 200, "")
		})
	}
}

// sse reads the named events of an account stream.
type sse struct {
	mu     sync.Mutex
	events []map[string]any // name -> data
	resp   *http.Response
}

func openStream(t *testing.T, e *apptest.Env) *sse {
	req, _ := http.NewRequest(http.MethodGet, e.URL+"/api/account/stream?broker=paper", nil)
	req.Header.Set("Authorization", "Bearer "+e.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	s := &sse{resp: resp}
	t.Cleanup(func() { resp.Body.Close() })
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		name := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				var m map[string]any
				_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &m)
				s.mu.Lock()
				s.events = append(s.events, map[string]any{"name": name, "data": m})
				s.mu.Unlock()
			}
		}
	}()
	return s
}

func (s *sse) locks() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, e := range s.events {
		if e["name"] == "lock" {
			out = append(out, e["data"].(map[string]any))
		}
	}
	return out
}

func TestLockOnStreamUnlockAndSettingsLock(t *testing.T) {
	clk := &clock{t: time.Date(2026, 11, 2, 14, 0, 0, 0, time.UTC)}
	e := apptest.Start(t, apptest.Options{Now: clk.Now, ManualFeed: true})
	quote(e, "100", "101")
	st := openStream(t, e)
	apptest.WaitFor(t, 5*time.Second, func() error {
		if len(st.locks()) != 1 || st.locks()[0]["tradingLocked"] != false {
			return fmt.Errorf("no lock event on connect: %v", st.locks())
		}
		return nil
	})
	status(t, put(e, map[string]any{"dailyLossEnabled": true, "dailyLossValue": 100, "lockSettingsWhenTradingLocked": true}), 200, "")
	status(t, e.Post("/api/trading/order", order("b1", "buy", "2")), 200, "")
	quote(e, "40", "41")
	apptest.WaitFor(t, 5*time.Second, func() error {
		ls := st.locks()
		if l := ls[len(ls)-1]; l["tradingLocked"] != true || l["settingsLocked"] != true {
			return fmt.Errorf("stream shows no lock: %v", l)
		}
		return nil
	})
	ls := st.locks()
	if got, want := ls[len(ls)-1], lock(t, e); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("stream lock %v, read %v", got, want)
	}
	// settings-locked: unlock and edits are refused and record nothing
	status(t, e.Post("/api/risk/unlock?broker=paper", nil), 423, "settings_locked")
	status(t, put(e, map[string]any{}), 423, "settings_locked")
	if l := lock(t, e); l["tradingLocked"] != true || l["settingsUnlockAt"] != "2026-11-03T00:00:00Z" {
		t.Fatalf("lock %v", l)
	}
	// at the unlock time the lock lifts by itself and the release reaches the stream
	clk.Set(time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC))
	apptest.WaitFor(t, 5*time.Second, func() error {
		ls := st.locks()
		if l := ls[len(ls)-1]; l["tradingLocked"] != false || l["settingsLocked"] != false {
			return fmt.Errorf("stream still locked: %v", l)
		}
		return nil
	})

	// without the settings lock, a manual unlock clears a fired control's lock
	status(t, put(e, map[string]any{"dailyLossEnabled": true, "dailyLossValue": 100}), 200, "")
	quote(e, "100", "101")
	status(t, e.Post("/api/trading/order", order("b2", "buy", "2")), 200, "")
	quote(e, "40", "41")
	apptest.WaitFor(t, 5*time.Second, func() error {
		if lock(t, e)["tradingLocked"] != true {
			return fmt.Errorf("not locked")
		}
		return nil
	})
	l := status(t, e.Post("/api/risk/unlock?broker=paper", nil), 200, "")["lock"].(map[string]any)
	if l["tradingLocked"] != false || l["lockReason"] != nil {
		t.Fatalf("after unlock: %v", l)
	}
	status(t, e.Post("/api/trading/order", order("b3", "buy", "1")), 200, "")
}

func TestSettingsRefusals(t *testing.T) {
	e := apptest.Start(t, apptest.Options{ManualFeed: true})
	before := lock(t, e)
	for _, body := range []string{
		`{"dailyLossEnabled": true}`,
		`{"dailyLossEnabled": true, "dailyLossValue": null}`,
		`{"dailyLossValue": -5}`,
		`{"dailyLossValue": "100"}`,
		`{"dailyLossValue": "abc"}`,
		`{"dailyLossEnabled": "yes"}`,
		`{"dailyLossEnabledd": true}`,
		`{"eodCloseEnabled": true, "eodCloseValue": 2.5}`,
		`{"broker": "other"}`,
		`{"weeklyLossValue": 1e400}`,
		`[1,2]`,
		`{"dailyLossValue": 1} trailing`,
	} {
		status(t, e.Do(apptest.Req{Method: http.MethodPut, Path: "/api/risk?broker=paper", Body: body}), 400, "")
	}
	if after := lock(t, e); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a refusal changed the settings: %v", after)
	}
	status(t, e.Get("/api/risk"), 400, "invalid_request")                          // broker is required
	status(t, e.Get("/api/risk?broker=nope"), 400, "invalid_request")              // unknown broker
	status(t, e.Get("/api/risk?broker=paper&account=XX1"), 400, "invalid_request") // not the caller's
	status(t, e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/risk/unlock?broker=paper", Body: `{"x":1}`}), 400, "")
	// a write with every field as read is accepted
	st := before["settings"].(map[string]any)
	st["dailyLossEnabled"], st["dailyLossValue"] = true, 250.25
	l := status(t, put(e, st), 200, "")["lock"].(map[string]any)
	if l["settings"].(map[string]any)["dailyLossValue"] != 250.25 {
		t.Fatalf("settings %v", l["settings"])
	}
}

// With the event log gone an order fails closed: it is refused before
// anything is sent, 503 with Retry-After, never decided on a state that may
// be behind; the lock itself is still read from the live state.
func TestUnreadableHoldsFailClosed(t *testing.T) {
	e := apptest.Start(t, apptest.Options{ManualFeed: true})
	quote(e, "100", "101")
	e.App.Log.Close()
	for _, r := range []*apptest.Resp{
		e.Post("/api/trading/order", order("x1", "buy", "1")),
		e.Post("/api/trading/order", order("x1", "buy", "1")),
	} {
		m := status(t, r, http.StatusServiceUnavailable, "log_unavailable")
		if r.Header.Get("Retry-After") != "1" || m["code"] != "log_unavailable" {
			t.Fatalf("%v %v", r.Header, m)
		}
	}
	status(t, e.Get("/api/risk?broker=paper"), http.StatusOK, "")
}

// A replacement is live at once: with a loss already beyond the new limit,
// the very next order meets the lock.
func TestSettingsLiveForTheNextOrder(t *testing.T) {
	clk := &clock{t: time.Date(2026, 11, 4, 10, 0, 0, 0, time.UTC)}
	e := apptest.Start(t, apptest.Options{Now: clk.Now, ManualFeed: true})
	quote(e, "100", "101")
	status(t, e.Post("/api/trading/order", order("b1", "buy", "2")), 200, "")
	quote(e, "90", "91") // PnL -21
	status(t, put(e, map[string]any{"dailyLossEnabled": true, "dailyLossValue": 20}), 200, "")
	m := status(t, e.Post("/api/trading/order", order("b2", "buy", "1")), 423, "risk_locked")
	if hs := m["params"].(map[string]any)["holds"].([]any); hs[0] != "daily_loss_limit" {
		t.Fatalf("holds %v", hs)
	}
	if l := lock(t, e); l["tradingLocked"] != true || l["triggerPnl"] != float64(-21) {
		t.Fatalf("lock %v", l)
	}
	// The lock reads the account's live state; positions read the read
	// models, which show the same flattening commit a moment later.
	apptest.WaitFor(t, 5*time.Second, func() error {
		if n := len(positions(t, e)); n != 0 {
			return fmt.Errorf("%d positions still shown", n)
		}
		return nil
	})
}
