package app_test

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/cmd/engine/app/apptest"
)

// FuzzChallengeBodies sends fuzzed bodies to the challenge area's writes
// through the real handler with CHALLENGES_ENABLED: a program's authoring as
// the demo venue's operator, an enrollment and a reset as a signed-in
// trader, and the enrollment history's query. The first byte picks the route; every other
// attempt repeats the previous Idempotency-Key, so replays and conflicts are
// fuzzed too. No answer may be a 5xx or an error without its body, and every
// accepted write's commits must read back.
func FuzzChallengeBodies(f *testing.F) {
	seeds := []string{
		`{"venueId":"%venue","name":"F","description":"","isActive":true,"stage":1,"nextChallengeId":null,"allowedTypes":["standard"],"accountSizes":[10000],"currency":"USD","priceCents":0,"profitTargetPct":10,"maxDailyDdPct":5,"maxTotalDdPct":10,"ddMode":"trailing_max_equity_eod","minTradingDays":0,"maxDurationDays":30,"allowWeekendHold":false,"profitSharePct":80}`,
		`{"venueId":"%venue","name":"F","stage":2,"allowedTypes":["a","a"],"accountSizes":[1e400,-1,0.001],"currency":"EUR","profitTargetPct":1e-9,"maxDailyDdPct":100,"maxTotalDdPct":"10","ddMode":"x"}`,
		`{"challengeId":"` + app.SampleStage1 + `","accountSize":10000,"accountType":"standard"}`,
		`{"challengeId":"` + app.SamplePriced + `","accountSize":25000}`,
		`{"challengeId":"not-a-uuid","accountSize":1e400,"accountType":"\u0000"}`,
		`enr_0000`,
		`{"enrollmentId":"enr_0000"}`,
		`{"enrollmentId":"\u0000","x":1}`,
	}
	for i, s := range seeds {
		f.Add(append([]byte{byte(i / 2)}, s...))
	}
	e := apptest.Start(f, apptest.Options{ManualFeed: true, Configure: enabled})
	fe := &fuzzEngine{Env: e}
	venue, operator := e.Creds["venueId"].(string), e.Creds["operatorSession"].(string)
	trader := e.SignIn("fuzz@example.com", "correct horse battery")
	n := 0
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		n++
		h := map[string]string{"Idempotency-Key": fmt.Sprintf("fz-%d", n-n%2), "Origin": e.URL}
		body := []byte(replaceVenue(string(b[1:]), venue))
		switch b[0] % 4 {
		case 0:
			h["Cookie"] = "svc_session=" + operator
			fe.sendWith(t, "PUT", "/api/challenges/7b000000-0000-4000-8000-00000000000"+fmt.Sprint(n%10), h, body)
		case 1:
			h["Cookie"] = "svc_session=" + trader
			fe.sendWith(t, "POST", "/api/enrollments", h, body)
		case 3:
			h["Cookie"] = "svc_session=" + trader
			fe.sendWith(t, "POST", "/api/enrollments/reset", h, body)
		default:
			h["Cookie"] = "svc_session=" + trader
			fe.sendWith(t, "GET", "/api/enrollments/events?id="+url.QueryEscape(string(b[1:])), h, nil)
		}
	})
}

func replaceVenue(s, venue string) string {
	out := []byte{}
	for i := 0; i < len(s); i++ {
		if len(s)-i >= 6 && s[i:i+6] == "%venue" {
			out = append(out, venue...)
			i += 5
			continue
		}
		out = append(out, s[i])
	}
	return string(out)
}
