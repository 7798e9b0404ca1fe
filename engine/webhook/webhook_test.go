package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evfirm "github.com/svc/engine/events/firm"
)

func TestSignIsStripesScheme(t *testing.T) {
	at := time.Unix(1700000000, 0)
	body := []byte(`{"id":"evt_1"}`)
	m := hmac.New(sha256.New, []byte("whsec_x"))
	m.Write([]byte("1700000000." + string(body)))
	want := "t=1700000000,v1=" + hex.EncodeToString(m.Sum(nil))
	if got := Sign("whsec_x", at, body); got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	if Secret([]byte("k"), "f", "w1") == Secret([]byte("k"), "f", "w2") || Secret([]byte("k"), "f", "w1") != Secret([]byte("k"), "f", "w1") {
		t.Fatal("secrets are not per endpoint and stable")
	}
}

func TestDeriveMapsCommitsToWebhookEvents(t *testing.T) {
	at := time.Date(2026, 11, 2, 14, 0, 0, 0, time.UTC)
	accounts := map[string]acctInfo{}
	commit := func(subject string, seq uint64, evs ...events.Event) events.Committed {
		return events.Committed{Subject: subject, Seq: seq, Commit: events.Commit{At: at, Events: evs}}
	}
	cases := []struct {
		c    events.Committed
		want string
	}{
		{commit("evt.account.a1", 1, evacct.Opened{TenantID: "f", AccountNumber: "EV1"}), "[]"},
		{commit("evt.account.a1", 2, evacct.BalanceChanged{ReferenceID: "r", Op: "credit", Amount: events.Int(5), At: at}), "[f balance.recorded evt_2_0]"},
		{commit("evt.account.a1", 3, evacct.BalanceChanged{ReferenceID: "z", Op: "reset", At: at}, evacct.OrderCanceled{}, evacct.AccountReset{ReferenceID: "z", At: at}), "[f account.reset evt_3_2]"},
		{commit("evt.account.a1", 4, evacct.FirmHalted{At: at}), "[f risk.locked evt_4_0]"},
		{commit("evt.account.a1", 5, evacct.FirmResumed{At: at}), "[f risk.unlocked evt_5_0]"},
		{commit("evt.account.a1", 6, evacct.RiskLocked{Control: "daily_loss_limit", At: at}), "[f risk.locked evt_6_0]"},
		{commit("evt.account.a1", 7, evacct.EvaluationReleased{At: at}), "[f risk.unlocked evt_7_0]"},
		{commit("evt.firm.f", 8, evfirm.RegistrationLinked{RegistrationID: "g", At: at}), "[f registration.linked evt_8_0]"},
		{commit("evt.firm.f", 9, evfirm.RegistrationRevoked{RegistrationID: "g", At: at}), "[f registration.revoked evt_9_0]"},
		{commit("evt.account.other", 10, evacct.FirmHalted{At: at}), "[]"}, // an account never seen opened
	}
	for _, c := range cases {
		var got []string
		for _, h := range derive(c.c, accounts) {
			got = append(got, h.tenant, h.ev.Type, h.ev.ID)
			if h.ev.Data == nil || h.ev.CreatedAt != at {
				t.Fatalf("event %+v", h.ev)
			}
		}
		if fmt.Sprint(got) != c.want {
			t.Fatalf("commit %d: got %v, want %s", c.c.Seq, got, c.want)
		}
	}
}
