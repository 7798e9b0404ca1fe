package jepsen

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"
)

// The kinds of operation the workload invokes.
const (
	KindPlace   = "place"   // POST /api/trading/order, keyed by clientOrderId
	KindCancel  = "cancel"  // POST /api/trading/cancel by brokerOrderId
	KindBalance = "balance" // POST /api/partner/balance-op, keyed by referenceId
	KindRead    = "read"    // GET /api/account/snapshot (one frame)
	KindReceipt = "receipt" // GET /api/operator/venues/{venueId}/balance-ops/{referenceId}
)

// The outcomes of one attempt, as the spec's client rules read an answer.
const (
	OK      = "ok"      // 200: done, the answer says what
	Dup     = "dup"     // 409 idempotency_conflict: the key was used; the earlier write stands
	Refused = "refused" // a definite refusal: nothing was recorded
	Fail    = "fail"    // a 503 the catalogue calls retry-safe: nothing was recorded
	Unknown = "unknown" // a timeout, a cut connection, outcome_unknown, another 5xx: it may have happened
)

// Op is one attempt: an HTTP request and what came of it. A logical
// operation (one clientOrderId placed, one balance operation) is every
// attempt with its Logical id, retried with the same key as the spec says
// until an answer settles it.
type Op struct {
	ID      int    `json:"id"`
	Logical int    `json:"logical"`
	Try     int    `json:"try"`
	Client  int    `json:"client"`
	Account string `json:"account"` // the account number
	Kind    string `json:"kind"`
	Key     string `json:"key"` // clientOrderId, referenceId, or the brokerOrderId a cancel names
	Node    int    `json:"node"`

	OrderType string `json:"orderType,omitempty"` // place: limit (rests) or market (fills)
	BalOp     string `json:"balOp,omitempty"`     // balance: credit or debit
	Cents     int64  `json:"cents,omitempty"`     // balance: the amount in cents
	After     uint64 `json:"after,omitempty"`     // reads: the X-Engine-After sent

	Call    time.Duration `json:"call"`
	Return  time.Duration `json:"return"` // for Unknown: when the client gave up on it
	Outcome string        `json:"outcome"`
	Status  int           `json:"status,omitempty"`
	Code    string        `json:"code,omitempty"`
	Err     string        `json:"err,omitempty"`
	Seq     uint64        `json:"seq,omitempty"` // X-Engine-Seq

	OrderID     string   `json:"orderId,omitempty"` // place ok/dup: the brokerOrderId answered
	State       string   `json:"state,omitempty"`   // place ok: the order's state answered
	Revision    uint64   `json:"revision,omitempty"`
	Working     []string `json:"working,omitempty"` // read: the working orders' clientOrderIds
	BalanceText string   `json:"balance,omitempty"` // read: the summary's balance
	Found       bool     `json:"found,omitempty"`   // receipt
	RecOp       string   `json:"recOp,omitempty"`   // receipt: its op
	RecCents    int64    `json:"recCents,omitempty"`
}

// History is every attempt of a run. Its methods are safe for concurrent use.
type History struct {
	start   time.Time
	mu      sync.Mutex
	ops     []*Op
	logical int
}

// NewHistory starts a history's clock.
func NewHistory() *History { return &History{start: time.Now()} }

// Start is when the history's clock began (the engines' logs are in wall
// time).
func (h *History) Start() time.Time { return h.start }

// Now is the time since the history began.
func (h *History) Now() time.Duration { return time.Since(h.start) }

// NewLogical is the id of a new logical operation.
func (h *History) NewLogical() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.logical++
	return h.logical
}

// Add records a completed attempt.
func (h *History) Add(op *Op) {
	h.mu.Lock()
	defer h.mu.Unlock()
	op.ID = len(h.ops)
	h.ops = append(h.ops, op)
}

// Ops is a copy of the attempts, in the order they completed.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Op, len(h.ops))
	for i, op := range h.ops {
		out[i] = *op
	}
	return out
}

// Write writes the attempts as JSON lines, in the order they were invoked.
func (h *History) Write(path string) error {
	ops := h.Ops()
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, op := range ops {
		if err := enc.Encode(op); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// String is the attempt in one line, for reports.
func (op Op) String() string {
	s := fmt.Sprintf("#%d client %d %s %s %s via n%d [%v, %v] -> %s", op.ID, op.Client, op.Kind, op.Account, op.Key, op.Node+1,
		op.Call.Round(time.Millisecond), op.Return.Round(time.Millisecond), op.Outcome)
	if op.Status != 0 {
		s += fmt.Sprintf(" %d", op.Status)
	}
	if op.Code != "" {
		s += " " + op.Code
	}
	if op.OrderID != "" {
		s += " order " + op.OrderID
	}
	if op.Seq != 0 {
		s += fmt.Sprintf(" seq %d", op.Seq)
	}
	if op.Err != "" {
		s += " (" + op.Err + ")"
	}
	return s
}
