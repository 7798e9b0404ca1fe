package risk

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/projections"
)

// FuzzSettingsBody: decoding a PUT /api/risk body never panics; every refusal
// is a 400 whose body carries an error sentence; an accepted body keeps every
// value a non-negative number and every enabled control valued.
func FuzzSettingsBody(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"dailyLossEnabled": true, "dailyLossValue": 500}`,
		`{"dailyLossEnabled": true, "dailyLossValue": 500, "weeklyLossEnabled": true, "weeklyLossValue": 1500, "dailyProfitEnabled": true, "dailyProfitValue": 800, "weeklyProfitEnabled": false, "weeklyProfitValue": null, "eodCloseEnabled": true, "eodCloseValue": 15, "lockSettingsWhenTradingLocked": true}`,
		`{"broker": "paper", "accountNumber": "PA000001", "updatedAt": 1700000000, "eodCloseValue": 15}`,
		`{"dailyLossEnabled": true}`,
		`{"dailyLossValue": -1}`,
		`{"dailyLossValue": "100"}`,
		`{"dailyLossValue": 1e999999999}`,
		`{"dailyLossValue": 1e-999999999}`,
		`{"eodCloseEnabled": true, "eodCloseValue": 15.5}`,
		`{"unknown": 1}`,
		`[]`,
		`null`,
		`{"dailyLossEnabled": 1}`,
		`{"a"`,
	} {
		f.Add([]byte(s))
	}
	acct := projections.Account{Broker: "paper", AccountNumber: "PA000001"}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPut, "/api/risk?broker=paper", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		c, err := DecodeSettings(r, acct)
		if err != nil {
			w := httptest.NewRecorder()
			httpx.WriteError(w, r, httpx.Trading, err)
			var m map[string]any
			if w.Code != http.StatusBadRequest || json.Unmarshal(w.Body.Bytes(), &m) != nil || m["error"] == "" || m["error"] == nil {
				t.Fatalf("refusal %d %s for %q", w.Code, w.Body, body)
			}
			return
		}
		st := c.Settings()
		for _, v := range []struct {
			on bool
			n  interface{ Sign() int }
		}{{st.DailyLossEnabled, ptrSign(st.DailyLossValue)}, {st.WeeklyLossEnabled, ptrSign(st.WeeklyLossValue)},
			{st.DailyProfitEnabled, ptrSign(st.DailyProfitValue)}, {st.WeeklyProfitEnabled, ptrSign(st.WeeklyProfitValue)},
			{st.EODCloseEnabled, ptrSign(st.EODCloseValue)}} {
			if v.n == nil && v.on {
				t.Fatalf("enabled without a value: %q", body)
			}
			if v.n != nil && (v.n.Sign() < 0 || (v.on && v.n.Sign() == 0)) {
				t.Fatalf("accepted value out of range: %q", body)
			}
		}
		var ref *commands.Refusal
		if errors.As(err, &ref) {
			t.Fatal("unreachable")
		}
	})
}

func ptrSign[T interface{ Sign() int }](p *T) interface{ Sign() int } {
	if p == nil {
		return nil
	}
	return *p
}
