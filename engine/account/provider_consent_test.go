package account_test

import (
	"errors"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	providercmd "github.com/svc/engine/commands/provider"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evidem "github.com/svc/engine/events/idem"
)

// consentEvents are the events only an account linked through a Connect
// app records: TestLiveConsentReplay records them.
var consentEvents = map[string]bool{evacct.LiveConsentSet{}.Type(): true}

// appLink is the link of a Binance account through a Connect app, with the
// trader's word on live trading by the app (nil: the form did not say).
func appLink(consent *bool) *providercmd.Link {
	c := link(evacct.ProviderSettings{})
	c.TenantID, c.AppID, c.Trader, c.LiveConsent = "capp_1", "app-1", "trader-1", consent
	return c
}

func word(b bool) *bool { return &b }

func withdraw(cause string) *providercmd.WithdrawLiveConsent {
	return &providercmd.WithdrawLiveConsent{Cause: cause}
}

func TestLiveConsentDecisions(t *testing.T) {
	consentOf := func(evs []events.Event) []evacct.LiveConsentSet {
		var out []evacct.LiveConsentSet
		for _, e := range evs {
			if c, ok := e.(evacct.LiveConsentSet); ok {
				out = append(out, c)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		given    []commands.Command
		when     commands.Command
		wantCode commands.Code
		want     []evacct.LiveConsentSet // the consents recorded (At aside)
		after    account.LiveConsent     // the state's consent after (At aside)
	}{
		{name: "an app's link with the box checked records the consent with the link",
			when: appLink(word(true)), want: []evacct.LiveConsentSet{{Granted: true, Cause: evacct.ConsentLink}},
			after: account.LiveConsent{Set: true, Granted: true, Cause: evacct.ConsentLink}},
		{name: "an app's link with the box unchecked records it withheld",
			when: appLink(word(false)), want: []evacct.LiveConsentSet{{Granted: false, Cause: evacct.ConsentLink}},
			after: account.LiveConsent{Set: true, Cause: evacct.ConsentLink}},
		{name: "an app's link that does not say records nothing: the default applies", when: appLink(nil)},
		{name: "a user's own link records no consent, whatever it says",
			when: func() commands.Command { c := link(evacct.ProviderSettings{}); c.LiveConsent = word(true); return c }()},
		{name: "linking again with the box checked grants it",
			given: []commands.Command{appLink(word(false))}, when: appLink(word(true)),
			want:  []evacct.LiveConsentSet{{Granted: true, Cause: evacct.ConsentRelink}},
			after: account.LiveConsent{Set: true, Granted: true, Cause: evacct.ConsentRelink}},
		{name: "linking again with the same word records nothing",
			given: []commands.Command{appLink(word(true))}, when: appLink(word(true)),
			after: account.LiveConsent{Set: true, Granted: true, Cause: evacct.ConsentLink}},
		{name: "linking again without a word keeps the one given",
			given: []commands.Command{appLink(word(true))}, when: appLink(nil),
			after: account.LiveConsent{Set: true, Granted: true, Cause: evacct.ConsentLink}},
		{name: "linking again with the box unchecked withholds it",
			given: []commands.Command{appLink(word(true))}, when: appLink(word(false)),
			want:  []evacct.LiveConsentSet{{Granted: false, Cause: evacct.ConsentRelink}},
			after: account.LiveConsent{Set: true, Cause: evacct.ConsentRelink}},
		{name: "the trader withdraws it on the page",
			given: []commands.Command{appLink(word(true))}, when: withdraw(evacct.ConsentHosted),
			want:  []evacct.LiveConsentSet{{Granted: false, Cause: evacct.ConsentHosted}},
			after: account.LiveConsent{Set: true, Cause: evacct.ConsentHosted}},
		{name: "a disconnect ends a consent never given too (the default no longer applies)",
			given: []commands.Command{appLink(nil)}, when: withdraw(evacct.ConsentDisconnect),
			want:  []evacct.LiveConsentSet{{Granted: false, Cause: evacct.ConsentDisconnect}},
			after: account.LiveConsent{Set: true, Cause: evacct.ConsentDisconnect}},
		{name: "withdrawing a consent withheld records nothing",
			given: []commands.Command{appLink(word(false))}, when: withdraw(evacct.ConsentDisconnect),
			after: account.LiveConsent{Set: true, Cause: evacct.ConsentLink}},
		{name: "withdrawing after unlinking records nothing",
			given: []commands.Command{appLink(word(true)), &providercmd.Unlink{}}, when: withdraw(evacct.ConsentHosted),
			after: account.LiveConsent{Set: true, Granted: true, Cause: evacct.ConsentLink}},
		{name: "a user's own account has no consent to withdraw",
			given: []commands.Command{link(evacct.ProviderSettings{})}, when: withdraw(evacct.ConsentHosted), wantCode: commands.CodeInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := account.New("a1")
			for i, c := range tc.given {
				evs, err := account.Decide(s, env(i, c))
				if err != nil {
					t.Fatalf("given %d (%T): %v", i, c, err)
				}
				for _, e := range evs {
					s = account.Apply(s, e)
				}
			}
			evs, err := account.Decide(s, env(99, tc.when))
			if tc.wantCode != "" {
				var r *commands.Refusal
				if !errors.As(err, &r) || r.Code != tc.wantCode {
					t.Fatalf("err %v, want %s", err, tc.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := consentOf(evs)
			if len(got) != len(tc.want) {
				t.Fatalf("consents %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i].Granted != tc.want[i].Granted || got[i].Cause != tc.want[i].Cause || !got[i].At.Equal(env(99, nil).At) {
					t.Fatalf("consent %+v, want %+v", got[i], tc.want[i])
				}
			}
			for _, e := range evs {
				s = account.Apply(s, e)
			}
			c := s.Provider.Consent
			c.At = time.Time{}
			if c != tc.after {
				t.Fatalf("the state's consent %+v, want %+v", c, tc.after)
			}
		})
	}
}

// LiveConsent.On: the trader's word, else the engine's default.
func TestLiveConsentOn(t *testing.T) {
	for _, tc := range []struct {
		c         account.LiveConsent
		byDefault bool
		want      bool
	}{
		{account.LiveConsent{}, false, false},
		{account.LiveConsent{}, true, true},
		{account.LiveConsent{Set: true, Granted: true}, false, true},
		{account.LiveConsent{Set: true}, true, false},
	} {
		if got := tc.c.On(tc.byDefault); got != tc.want {
			t.Errorf("%+v with default %v: %v, want %v", tc.c, tc.byDefault, got, tc.want)
		}
	}
}

// The consent given, withdrawn and given again folds to the same state on
// a replay of the log as live.
func TestLiveConsentReplay(t *testing.T) {
	r := enginetest.NewReplay(t, enginetest.Core[*account.State]{
		New:      func() *account.State { return account.New("a1") },
		Decide:   account.Decide,
		Apply:    account.Apply,
		Registry: events.Merge(account.Registry(), evidem.Registry()),
	})
	n := 0
	seen := map[string]bool{}
	do := func(cmd commands.Command) {
		t.Helper()
		if err := cmd.Validate(); err != nil {
			t.Fatalf("%T: %v", cmd, err)
		}
		n++
		id := ulid.MustParse("01J00000000000000000000000")
		id[15] = byte(n)
		for _, e := range r.Do(commands.Envelope{ID: id, At: t0.Add(time.Duration(n) * time.Second), Cmd: cmd}) {
			seen[e.Type()] = true
		}
	}
	do(appLink(word(true)))
	do(withdraw(evacct.ConsentHosted))
	do(appLink(word(true)))
	if c := r.Live().Provider.Consent; !c.Set || !c.Granted || c.Cause != evacct.ConsentRelink || !c.At.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("after linking again: %+v", c)
	}
	do(withdraw(evacct.ConsentDisconnect))
	if c := r.Live().Provider.Consent; c.Granted || c.Cause != evacct.ConsentDisconnect {
		t.Fatalf("after the disconnect: %+v", c)
	}
	for name := range consentEvents {
		if !seen[name] {
			t.Errorf("the script records no %s", name)
		}
	}
	r.Check()
}
