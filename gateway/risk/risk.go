// Package risk serves /api/risk: read the five controls with the lock, replace
// the controls in one write, and the trader's manual unlock.
package risk

import (
	"context"
	"encoding/json"
	"github.com/svc/engine/commands"
	"net/http"
	"strconv"
	"time"

	riskcmd "github.com/svc/engine/commands/risk"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/gateway/stream"
	"github.com/svc/engine/projections"
)

// New makes the risk handlers; the route table is gateway/routes.go.
func New(d *api.Deps) *Handlers { return &Handlers{d} }

// Number renders an exact decimal as a JSON number (the RiskLock's numbers), never through a float.
type Number struct{ events.Decimal }

// MarshalJSON writes the decimal's digits unquoted.
func (n Number) MarshalJSON() ([]byte, error) { return []byte(n.String()), nil }

func number(d *events.Decimal) *Number {
	if d == nil {
		return nil
	}
	return &Number{*d}
}

// Settings is the RiskLock's settings object.
type Settings struct {
	Broker                        string  `json:"broker"`
	AccountNumber                 string  `json:"accountNumber"`
	DailyLossEnabled              bool    `json:"dailyLossEnabled"`
	DailyLossValue                *Number `json:"dailyLossValue"`
	WeeklyLossEnabled             bool    `json:"weeklyLossEnabled"`
	WeeklyLossValue               *Number `json:"weeklyLossValue"`
	DailyProfitEnabled            bool    `json:"dailyProfitEnabled"`
	DailyProfitValue              *Number `json:"dailyProfitValue"`
	WeeklyProfitEnabled           bool    `json:"weeklyProfitEnabled"`
	WeeklyProfitValue             *Number `json:"weeklyProfitValue"`
	EODCloseEnabled               bool    `json:"eodCloseEnabled"`
	EODCloseValue                 *Number `json:"eodCloseValue"`
	LockSettingsWhenTradingLocked bool    `json:"lockSettingsWhenTradingLocked"`
	UpdatedAt                     int64   `json:"updatedAt"`
}

// RiskLock is the spec's RiskLock resource.
type RiskLock struct {
	Broker           string     `json:"broker"`
	AccountNumber    string     `json:"accountNumber"`
	TradingLocked    bool       `json:"tradingLocked"`
	SettingsLocked   bool       `json:"settingsLocked"`
	FlattenConfirmed bool       `json:"flattenConfirmed"`
	LockReason       *string    `json:"lockReason"`
	LockWindow       any        `json:"lockWindow"` // always null
	TradingUnlockAt  *time.Time `json:"tradingUnlockAt"`
	SettingsUnlockAt *time.Time `json:"settingsUnlockAt"`
	TriggerPnl       *Number    `json:"triggerPnl"`
	Monitoring       string     `json:"monitoring"`
	Settings         Settings   `json:"settings"`
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// Render is the RiskLock of a lock view.
func Render(v engine.LockView) RiskLock {
	st := v.Settings
	l := RiskLock{Broker: v.Broker, AccountNumber: v.AccountNumber, TradingLocked: v.TradingLocked,
		SettingsLocked: v.SettingsLocked, FlattenConfirmed: v.FlattenConfirmed,
		TradingUnlockAt: utc(v.TradingUnlockAt), SettingsUnlockAt: utc(v.SettingsUnlockAt),
		TriggerPnl: number(v.TriggerPnl), Monitoring: v.Monitoring,
		Settings: Settings{Broker: v.Broker, AccountNumber: v.AccountNumber,
			DailyLossEnabled: st.DailyLossEnabled, DailyLossValue: number(st.DailyLossValue),
			WeeklyLossEnabled: st.WeeklyLossEnabled, WeeklyLossValue: number(st.WeeklyLossValue),
			DailyProfitEnabled: st.DailyProfitEnabled, DailyProfitValue: number(st.DailyProfitValue),
			WeeklyProfitEnabled: st.WeeklyProfitEnabled, WeeklyProfitValue: number(st.WeeklyProfitValue),
			EODCloseEnabled: st.EODCloseEnabled, EODCloseValue: number(st.EODCloseValue),
			LockSettingsWhenTradingLocked: st.LockSettingsWhenTradingLocked}}
	if v.LockReason != "" {
		r := v.LockReason
		l.LockReason = &r
	}
	if !v.UpdatedAt.IsZero() {
		l.Settings.UpdatedAt = v.UpdatedAt.Unix()
	}
	return l
}

// Payload is the account stream's `lock` event carrying the lock as of revision rev.
func Payload(rev uint64, v engine.LockView) stream.Payload {
	b, _ := json.Marshal(Render(v))
	return stream.Payload{Name: "lock", ID: strconv.FormatUint(rev, 10), Data: b, Rev: rev}
}

// Read is the account's lock now, read from its live state; a state that
// cannot be read fails closed (503 holds_unreadable).
func Read(ctx context.Context, e *engine.Engine, accountID string) (engine.LockView, uint64, error) {
	return e.RiskLock(ctx, accountID)
}

// OnConnect sends a new subscriber of the account stream the current lock,
// as of the frame it was just sent or later (at rev, the frame's revision,
// if the lock changed no later): on a node of several the frame comes from
// the read models, which may be ahead of this node's state of the account,
// and the lock waits for it (engine.Observed) at most connectWait. A lock
// read without it keeps its own revision.
func OnConnect(e *engine.Engine) func(ctx context.Context, accountID string, rev uint64) []stream.Payload {
	return func(ctx context.Context, accountID string, rev uint64) []stream.Payload {
		wait, cancel := context.WithTimeout(ctx, connectWait)
		caught := e.Observed(wait, rev) == nil
		cancel()
		v, at, err := Read(ctx, e, accountID)
		if err != nil {
			return nil
		}
		if caught {
			at = max(at, rev)
		}
		return []stream.Payload{Payload(at, v)}
	}
}

// connectWait bounds how long a new subscriber's lock waits for this node's
// state of the account to reach the frame it was sent (OnConnect).
const connectWait = 2 * time.Second

type Handlers struct{ d *api.Deps }

// account resolves the selectors; broker is required on the risk routes.
func (h *Handlers) account(r *http.Request) (projections.Account, error) {
	if !r.URL.Query().Has("broker") {
		return projections.Account{}, httpx.Errorf(http.StatusBadRequest, commands.CodeInvalidRequest, "broker is required")
	}
	return h.d.Account(r)
}

func (h *Handlers) answer(w http.ResponseWriter, r *http.Request, accountID string) error {
	v, _, err := Read(r.Context(), h.d.Engine, accountID)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"lock": Render(v)})
	return nil
}

func (h *Handlers) Get(w http.ResponseWriter, r *http.Request) error {
	a, err := h.account(r)
	if err != nil {
		return err
	}
	return h.answer(w, r, a.AccountID)
}

// DecodeSettings reads a PUT /api/risk body strictly for account a: unknown
// fields, non-numeric or negative values, a value missing for an enabled
// control, or a broker or accountNumber naming another account are 400.
func DecodeSettings(r *http.Request, a projections.Account) (*riskcmd.SetSettings, error) {
	var c riskcmd.SetSettings
	if err := httpx.Decode(r, &c, 0); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if (c.Broker != nil && *c.Broker != a.Broker) || (c.AccountNumber != nil && *c.AccountNumber != a.AccountNumber) {
		return nil, httpx.Errorf(http.StatusBadRequest, commands.CodeInvalidRequest, "broker and accountNumber, when sent, must name the selected account")
	}
	return &c, nil
}

func (h *Handlers) Put(w http.ResponseWriter, r *http.Request) error {
	a, err := h.account(r)
	if err != nil {
		return err
	}
	c, err := DecodeSettings(r, a)
	if err != nil {
		return err
	}
	if _, err := h.d.Exec(r, a.AccountID, "", c); err != nil {
		return err
	}
	return h.answer(w, r, a.AccountID)
}

func (h *Handlers) Unlock(w http.ResponseWriter, r *http.Request) error {
	a, err := h.account(r)
	if err != nil {
		return err
	}
	var body struct{}
	if err := httpx.Decode(r, &body, 0); err != nil {
		return err
	}
	if _, err := h.d.Exec(r, a.AccountID, "", &riskcmd.Unlock{}); err != nil {
		return err
	}
	return h.answer(w, r, a.AccountID)
}

// Wire connects the account stream to the lock: a `lock` event whenever the
// lock changes, and the current lock to every new subscriber.
func Wire(e *engine.Engine, h *stream.Hub) {
	h.OnConnect(OnConnect(e))
	e.OnLock(func(accountID string, rev uint64, v engine.LockView) { h.Send(accountID, Payload(rev, v)) })
}
