package jepsen

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/svc/engine/cmd/engine/clusterkit"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// Anomaly is one thing the history or the log shows that the engine
// promises never happens.
type Anomaly struct {
	Check   string // which checker
	Account string
	Key     string
	What    string
}

func (a Anomaly) String() string {
	return fmt.Sprintf("[%s] %s %s: %s", a.Check, a.Account, a.Key, a.What)
}

// Report is what the checkers found.
type Report struct {
	Anomalies []Anomaly
	// Known are the anomalies of the checks Checker.Known names: found,
	// reported, not yet fixed; they do not fail a run.
	Known []Anomaly
	// Histories counts the histories porcupine checked, by model; Undecided
	// the ones its time bound left undecided (no violation found in it).
	Histories map[string]int
	Undecided map[string]int
	// Outcomes counts the attempts by kind and outcome.
	Outcomes map[string]map[string]int
	// Settled counts the logical writes that met an unknown outcome and then
	// settled; Unsettled lists the ones still unsettled when the run ended.
	Settled   int
	Unsettled []string
	Reads     int // frames held to the log
	Receipts  int
	Commits   int // account commits read from the log
	// Dir holds the history, the anomalies and porcupine's visualizations
	// when there are anomalies.
	Dir string
}

// accountLog is one account's commits and what they say.
type accountLog struct {
	commits  []commitFact
	placed   map[string][]placed // clientOrderId -> its OrderPlaced events
	byID     map[string]string   // brokerOrderId -> clientOrderId
	canceled map[string]int      // brokerOrderId -> OrderCanceled events
	refs     map[string][]ledger // referenceId -> its BalanceChanged events
}

type commitFact struct {
	seq, prev uint64
	hasPrev   bool
	evs       []events.Event
}

type placed struct {
	seq uint64
	id  string
	typ string
}

type ledger struct {
	seq   uint64
	op    string
	cents int64
	after events.Decimal
}

// readAccount reads an account's commits from the log.
func readAccount(ctx context.Context, l *eventlog.Log, reg events.Registry, accountID string) (*accountLog, error) {
	a := &accountLog{placed: map[string][]placed{}, byID: map[string]string{}, canceled: map[string]int{}, refs: map[string][]ledger{}}
	_, err := l.Load(ctx, events.Subject(events.KindAccount, accountID), func(m eventlog.Msg) error {
		c, err := reg.Decode(m.Data)
		if err != nil {
			return fmt.Errorf("commit %d: %w", m.Seq, err)
		}
		a.commits = append(a.commits, commitFact{seq: m.Seq, prev: m.Prev, hasPrev: m.HasPrev, evs: c.Events})
		for _, e := range c.Events {
			switch e := e.(type) {
			case evacct.OrderPlaced:
				a.placed[e.Order.ClientOrderID] = append(a.placed[e.Order.ClientOrderID], placed{seq: m.Seq, id: e.Order.BrokerOrderID, typ: e.Order.OrderType})
				a.byID[e.Order.BrokerOrderID] = e.Order.ClientOrderID
			case evacct.OrderCanceled:
				a.canceled[e.BrokerOrderID]++
			case evacct.BalanceChanged:
				a.refs[e.ReferenceID] = append(a.refs[e.ReferenceID], ledger{seq: m.Seq, op: e.Op, cents: toCents(e.Amount), after: e.Balance})
			}
		}
		return nil
	})
	return a, err
}

// at is the account as of revision rev: its working orders' clientOrderIds
// (sorted) and its balance (start until a commit says otherwise), and the
// sequence of the last commit at or before rev.
func (a *accountLog) at(rev uint64, start events.Decimal) (working []string, balance events.Decimal, last uint64) {
	live := map[string]string{} // brokerOrderId -> clientOrderId
	balance = start
	for _, c := range a.commits {
		if c.seq > rev {
			break
		}
		last = c.seq
		for _, e := range c.evs {
			switch e := e.(type) {
			case evacct.OrderPlaced:
				live[e.Order.BrokerOrderID] = e.Order.ClientOrderID
			case evacct.OrderFilled:
				if e.Done {
					delete(live, e.BrokerOrderID)
				}
				balance = e.Balance
			case evacct.OrderCanceled:
				delete(live, e.BrokerOrderID)
			case evacct.BalanceChanged:
				balance = e.Balance
			}
		}
	}
	for _, coid := range live {
		working = append(working, coid)
	}
	sort.Strings(working)
	return working, balance, last
}

// Checker holds a run's history to the models and to the log.
type Checker struct {
	C       *Cluster
	W       *Workload
	H       *History
	Windows []Window
	// Timeout bounds porcupine on one history.
	Timeout time.Duration
	// Known names checks whose anomalies are known and open (check -> why):
	// they go to Report.Known.
	Known map[string]string

	rep      *Report
	ops      []Op
	logs     map[string]*accountLog // account number -> its log
	failures []failure              // porcupine's illegal histories
}

type failure struct {
	name  string
	model porcupine.Model
	ops   []porcupine.Operation
}

// Check runs every checker; the cluster must be healed and quiet (the
// workload ended). It writes the history, the anomalies and porcupine's
// visualizations to a directory of their own when it finds anomalies.
func (k *Checker) Check(ctx context.Context) (*Report, error) {
	k.rep = &Report{Histories: map[string]int{}, Undecided: map[string]int{}, Outcomes: map[string]map[string]int{}}
	k.ops = k.H.Ops()
	sort.SliceStable(k.ops, func(i, j int) bool { return k.ops[i].Call < k.ops[j].Call })
	for _, op := range k.ops {
		if k.rep.Outcomes[op.Kind] == nil {
			k.rep.Outcomes[op.Kind] = map[string]int{}
		}
		k.rep.Outcomes[op.Kind][op.Outcome]++
	}
	l, err := k.C.OpenLog(ctx)
	if err != nil {
		return nil, fmt.Errorf("jepsen: open the log: %w", err)
	}
	defer l.Close()
	reg := engine.Registry()
	k.logs = map[string]*accountLog{}
	for _, a := range append(append([]Account(nil), k.W.Trade...), k.W.Money...) {
		al, err := readAccount(ctx, l, reg, a.ID)
		if err != nil {
			return nil, fmt.Errorf("jepsen: read %s from the log: %w", a.Number, err)
		}
		k.logs[a.Number] = al
		k.rep.Commits += len(al.commits)
	}
	last, err := l.LastSeq(ctx)
	if err != nil {
		return nil, err
	}
	k.fencing()
	k.orders()
	k.balances()
	k.reads()
	k.settled()
	k.final(last)
	if len(k.rep.Anomalies)+len(k.rep.Known) > 0 {
		if err := k.write(); err != nil {
			return k.rep, err
		}
	}
	return k.rep, nil
}

func (k *Checker) anomaly(check, account, key, format string, args ...any) {
	a := Anomaly{Check: check, Account: account, Key: key, What: fmt.Sprintf(format, args...)}
	if _, known := k.Known[check]; known {
		k.rep.Known = append(k.rep.Known, a)
		return
	}
	k.rep.Anomalies = append(k.rep.Anomalies, a)
}

// fencing: every commit of an account was appended on the expectation of
// the account's previous commit (the server enforces the expectation, so
// an account's commits form one chain: one writer at a time decided on the
// newest state). A commit with no expectation, or one that expected an
// older commit, is a write of a node that was not fenced.
func (k *Checker) fencing() {
	for num, al := range k.logs {
		prev := uint64(0)
		for i, c := range al.commits {
			switch {
			case !c.hasPrev:
				k.anomaly("fencing", num, strconv.FormatUint(c.seq, 10), "commit %d carries no expected sequence: appended unfenced", c.seq)
			case c.prev != prev && i > 0:
				k.anomaly("fencing", num, strconv.FormatUint(c.seq, 10),
					"commit %d was appended on the expectation of %d, but the account's previous commit is %d: two writers decided on one state", c.seq, c.prev, prev)
			}
			prev = c.seq
		}
	}
}

// orders checks the orders' histories with porcupine, one per
// clientOrderId, and holds every answer to the log.
func (k *Checker) orders() {
	end := k.H.Now().Nanoseconds() + int64(time.Second)
	for _, a := range k.W.Trade {
		al := k.logs[a.Number]
		byKey := map[string][]Op{}
		answered := map[string]map[string]bool{} // clientOrderId -> ids answered
		idOf := map[string]string{}              // brokerOrderId -> clientOrderId, as answered
		for _, op := range k.ops {
			if op.Account != a.Number || op.Kind != KindPlace {
				continue
			}
			byKey[op.Key] = append(byKey[op.Key], op)
			if op.OrderID != "" {
				if answered[op.Key] == nil {
					answered[op.Key] = map[string]bool{}
				}
				answered[op.Key][op.OrderID] = true
				idOf[op.OrderID] = op.Key
			}
		}
		for _, op := range k.ops {
			if op.Account != a.Number || op.Kind != KindCancel {
				continue
			}
			coid := idOf[op.Key]
			if coid == "" {
				coid = al.byID[op.Key]
			}
			if coid == "" {
				k.anomaly("orders", a.Number, op.Key, "a cancel names brokerOrderId %s, which no answer and no commit gave", op.Key)
				continue
			}
			byKey[coid] = append(byKey[coid], op)
		}
		// The brokerOrderIds answered and recorded: one clientOrderId each.
		owner := map[string]string{}
		for coid, ps := range al.placed {
			for _, p := range ps {
				if o, ok := owner[p.id]; ok && o != coid {
					k.anomaly("orders", a.Number, p.id, "brokerOrderId names orders of %s and %s", o, coid)
				}
				owner[p.id] = coid
			}
		}
		keys := make([]string, 0, len(byKey))
		for coid := range byKey {
			keys = append(keys, coid)
		}
		sort.Strings(keys)
		for _, coid := range keys {
			ops := byKey[coid]
			k.porcupine("order "+a.Number+" "+coid, OrderModel, ops, end, func(op Op) (any, any) {
				return orderIn{Kind: op.Kind, OrderType: op.OrderType, CancelID: cancelID(op)},
					orderOut{Outcome: op.Outcome, OrderID: op.OrderID, State: op.State, Code: op.Code}
			})
			k.orderInLog(a.Number, coid, ops, al, answered[coid])
		}
		for coid := range al.placed {
			if _, sent := byKey[coid]; !sent {
				k.anomaly("orders", a.Number, coid, "the log holds an order no client ever sent")
			}
		}
		for id, n := range al.canceled {
			if n > 1 {
				k.anomaly("orders", a.Number, id, "canceled %d times", n)
			}
		}
	}
}

func cancelID(op Op) string {
	if op.Kind == KindCancel {
		return op.Key
	}
	return ""
}

// orderInLog: an acknowledged clientOrderId is placed exactly once, under
// the id every answer gave; one whose every attempt was refused (or failed
// before anything was recorded) is not placed at all.
func (k *Checker) orderInLog(account, coid string, ops []Op, al *accountLog, ids map[string]bool) {
	var places []Op
	for _, op := range ops {
		if op.Kind == KindPlace {
			places = append(places, op)
		}
	}
	if len(places) == 0 {
		return
	}
	acked, maybe := false, false
	for _, op := range places {
		switch op.Outcome {
		case OK, Dup:
			acked = true
		case Unknown:
			maybe = true
		}
	}
	got := al.placed[coid]
	switch {
	case len(got) > 1:
		k.anomaly("orders", account, coid, "placed %d times (commits %v)", len(got), seqs(got))
	case acked && len(got) == 0:
		k.anomaly("orders", account, coid, "acknowledged, but the log holds no such order")
	case !acked && !maybe && len(got) > 0:
		k.anomaly("orders", account, coid, "every attempt was refused or failed before anything was recorded, yet commit %d placed it", got[0].seq)
	}
	for id := range ids {
		if len(got) == 1 && got[0].id != id {
			k.anomaly("orders", account, coid, "an answer named order %s; the log placed %s", id, got[0].id)
		}
	}
}

func seqs(ps []placed) []uint64 {
	var out []uint64
	for _, p := range ps {
		out = append(out, p.seq)
	}
	return out
}

// balances checks each firm account's balance operations with porcupine and
// holds them to the log's ledger.
func (k *Checker) balances() {
	end := k.H.Now().Nanoseconds() + int64(time.Second)
	for _, a := range k.W.Money {
		al := k.logs[a.Number]
		var ops []Op
		byRef := map[string][]Op{}
		for _, op := range k.ops {
			if op.Account == a.Number && op.Kind == KindBalance {
				ops = append(ops, op)
				byRef[op.Key] = append(byRef[op.Key], op)
			}
		}
		k.porcupine("balance "+a.Number, BalanceModel(toCents(a.Start)), ops, end, func(op Op) (any, any) {
			return balanceIn{Ref: op.Key, Op: op.BalOp, Cents: op.Cents}, balanceOut{Outcome: op.Outcome, Code: op.Code}
		})
		for ref, ops := range byRef {
			got := al.refs[ref]
			acked, maybe := false, false
			for _, op := range ops {
				switch op.Outcome {
				case OK:
					acked = true
					if len(got) == 1 && (got[0].op != op.BalOp || got[0].cents != op.Cents) {
						k.anomaly("balance", a.Number, ref, "answered %s %s as done; the log recorded %s %s", op.BalOp, cents(op.Cents), got[0].op, cents(got[0].cents))
					}
				case Dup:
					acked = true
				case Unknown:
					maybe = true
				}
			}
			switch {
			case len(got) > 1:
				k.anomaly("balance", a.Number, ref, "recorded %d times", len(got))
			case acked && len(got) == 0:
				k.anomaly("balance", a.Number, ref, "acknowledged, but the log holds no such operation")
			case !acked && !maybe && len(got) > 0:
				k.anomaly("balance", a.Number, ref, "every attempt was refused or failed before anything was recorded, yet commit %d recorded it", got[0].seq)
			}
		}
		for ref := range al.refs {
			if _, sent := byRef[ref]; !sent {
				k.anomaly("balance", a.Number, ref, "the log holds an operation no client ever sent")
			}
		}
		// The ledger: each entry's balance is the one before it moved by its amount.
		run := a.Start
		for _, c := range al.commits {
			for _, e := range c.evs {
				bc, ok := e.(evacct.BalanceChanged)
				if !ok {
					continue
				}
				d := bc.Amount
				if bc.Op == "debit" {
					d = d.Neg()
				}
				if want := run.Add(d); bc.Balance.Cmp(want) != 0 {
					k.anomaly("ledger", a.Number, bc.ReferenceID, "commit %d says the balance is %s after %s %s on %s", c.seq, bc.Balance, bc.Op, bc.Amount, run)
				}
				run = bc.Balance
			}
		}
	}
}

// porcupine checks one history; an illegal one is kept for visualization.
func (k *Checker) porcupine(name string, model porcupine.Model, ops []Op, end int64, io func(Op) (any, any)) {
	if len(ops) == 0 {
		return
	}
	kind, _, _ := strings.Cut(name, " ")
	hist := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		in, out := io(op)
		ret := op.Return.Nanoseconds()
		if op.Outcome == Unknown {
			ret = end // it may take effect any time after its call
		}
		hist = append(hist, porcupine.Operation{ClientId: op.Client, Input: in, Output: out, Call: op.Call.Nanoseconds(), Return: ret,
			Metadata: fmt.Sprintf("attempt #%d (logical %d, try %d) via n%d", op.ID, op.Logical, op.Try, op.Node+1)})
	}
	k.rep.Histories[kind]++
	switch porcupine.CheckOperationsTimeout(model, hist, k.Timeout) {
	case porcupine.Illegal:
		k.anomaly("linearizability", name, "", "porcupine: no linearization of %d operations", len(hist))
		k.failures = append(k.failures, failure{name: name, model: model, ops: hist})
	case porcupine.Unknown:
		k.rep.Undecided[kind]++
	}
}

// reads holds every frame read to the log: the frame at revision R shows
// the account as the log has it after its last commit at or before R (the
// working orders and the balance, "as of one moment"); a client's revisions
// never go back; a read sent with X-Engine-After shows at least the
// client's own acknowledged writes on the account (read-your-writes).
// Receipts: one found is recorded with its op and amount; one the client
// saw acknowledged before is found.
func (k *Checker) reads() {
	start := map[string]events.Decimal{}
	for _, a := range append(append([]Account(nil), k.W.Trade...), k.W.Money...) {
		start[a.Number] = a.Start
	}
	type ck struct {
		client  int
		account string
	}
	lastRev := map[ck]uint64{}
	ownSeq := map[ck][]Op{} // the client's acknowledged writes on the account
	for _, op := range k.ops {
		if (op.Kind == KindPlace || op.Kind == KindCancel || op.Kind == KindBalance) && op.Outcome == OK && op.Seq > 0 {
			ownSeq[ck{op.Client, op.Account}] = append(ownSeq[ck{op.Client, op.Account}], op)
		}
	}
	for _, op := range k.ops {
		key := ck{op.Client, op.Account}
		switch {
		case op.Kind == KindRead && op.Outcome == OK:
			k.rep.Reads++
			al := k.logs[op.Account]
			working, balance, last := al.at(op.Revision, start[op.Account])
			got := append([]string(nil), op.Working...)
			sort.Strings(got)
			if !slices.Equal(got, working) {
				k.anomaly("frame", op.Account, strconv.FormatUint(op.Revision, 10),
					"the frame at revision %d (read #%d via n%d) shows working orders %v; the log at commit %d has %v", op.Revision, op.ID, op.Node+1, got, last, working)
			}
			if b, err := events.ParseDecimal(op.BalanceText); err != nil || b.Cmp(balance) != 0 {
				k.anomaly("frame", op.Account, strconv.FormatUint(op.Revision, 10),
					"the frame at revision %d (read #%d via n%d) shows balance %s; the log at commit %d has %s", op.Revision, op.ID, op.Node+1, op.BalanceText, last, balance)
			}
			if prev := lastRev[key]; op.Revision < prev {
				k.anomaly("monotonic", op.Account, strconv.FormatUint(op.Revision, 10),
					"client %d read revision %d after revision %d (read #%d via n%d): a frame went back", op.Client, op.Revision, prev, op.ID, op.Node+1)
			}
			lastRev[key] = max(lastRev[key], op.Revision)
			for _, w := range ownSeq[key] {
				if w.Return < op.Call && w.Seq <= op.After && op.Revision < w.Seq {
					k.anomaly("read-your-writes", op.Account, w.Key,
						"client %d's write at commit %d was acknowledged before it read revision %d (read #%d via n%d, X-Engine-After %d): its own write is missing",
						op.Client, w.Seq, op.Revision, op.ID, op.Node+1, op.After)
					break
				}
			}
		case op.Kind == KindReceipt && op.Outcome == OK:
			k.rep.Receipts++
			got := k.logs[op.Account].refs[op.Key]
			switch {
			case op.Found && len(got) == 0:
				k.anomaly("receipts", op.Account, op.Key, "a receipt was read (#%d via n%d) for an operation the log never recorded", op.ID, op.Node+1)
			case op.Found && (got[0].op != op.RecOp || got[0].cents != op.RecCents):
				k.anomaly("receipts", op.Account, op.Key, "the receipt (#%d) says %s %s; the log recorded %s %s", op.ID, op.RecOp, cents(op.RecCents), got[0].op, cents(got[0].cents))
			case !op.Found:
				for _, w := range ownSeq[key] {
					if w.Key == op.Key && w.Return < op.Call && w.Seq <= op.After {
						k.anomaly("receipts", op.Account, op.Key, "client %d had the operation acknowledged at commit %d, then read no receipt for it (#%d via n%d, X-Engine-After %d)",
							op.Client, w.Seq, op.ID, op.Node+1, op.After)
						break
					}
				}
			}
		}
	}
}

// settled: every logical write that met an unknown outcome settled to an
// answer (its key's effect in the log exactly once is orders' and balances'
// business); one still unsettled when the run ended is listed.
func (k *Checker) settled() {
	last := map[int]Op{}
	unknown := map[int]bool{}
	for _, op := range k.ops {
		if op.Kind != KindPlace && op.Kind != KindCancel && op.Kind != KindBalance {
			continue
		}
		if op.Outcome == Unknown {
			unknown[op.Logical] = true
		}
		if p, ok := last[op.Logical]; !ok || op.Try > p.Try {
			last[op.Logical] = op
		}
	}
	for id, op := range last {
		switch op.Outcome {
		case OK, Dup, Refused:
			if unknown[id] {
				k.rep.Settled++
			}
		default:
			k.rep.Unsettled = append(k.rep.Unsettled, op.String())
		}
	}
	sort.Strings(k.rep.Unsettled)
}

// final reads every account through every engine once its read models show
// the whole log: the frame's revision is the account's last commit and its
// state the log's; the positions and balance of a trading account equal a
// recomputation from its fills; a firm account's balance equals its ledger.
func (k *Checker) final(last uint64) {
	cl := &http.Client{Timeout: 10 * time.Second}
	after := map[string]string{"X-Engine-After": strconv.FormatUint(last, 10)}
	for i := range k.C.Engines {
		base := k.C.EngineURL(i)
		for _, a := range k.W.Trade {
			al := k.logs[a.Number]
			var frame struct {
				Revision uint64 `json:"revision"`
			}
			err := waitFor(30*time.Second, func() error {
				code, b, _, err := call(cl, base, k.C.Creds.TradingKey, http.MethodGet, "/api/account/snapshot?account="+a.Number, nil, after)
				if err != nil || code != http.StatusOK {
					return fmt.Errorf("snapshot: %d %s %v", code, b, err)
				}
				return jsonInto(b, &frame)
			})
			if err != nil {
				k.anomaly("final", a.Number, engineName(i), "no frame within 30 s of the run's end: %v", err)
				continue
			}
			if n := len(al.commits); n > 0 && frame.Revision != al.commits[n-1].seq {
				k.anomaly("final", a.Number, engineName(i), "the frame's revision is %d; the account's last commit is %d", frame.Revision, al.commits[n-1].seq)
			}
			if _, _, err := clusterkit.CheckLedger(cl, base, k.C.Creds.TradingKey, a.Number, a.Start); err != nil {
				k.anomaly("ledger", a.Number, engineName(i), "%v", err)
			}
		}
		var list struct {
			Accounts []struct {
				AccountNumber string         `json:"accountNumber"`
				Balance       events.Decimal `json:"balance"`
			} `json:"accounts"`
		}
		err := waitFor(30*time.Second, func() error {
			code, b, _, err := call(cl, base, k.C.Creds.PartnerKey, http.MethodGet, "/api/partner/accounts", nil, after)
			if err != nil || code != http.StatusOK {
				return fmt.Errorf("accounts: %d %s %v", code, b, err)
			}
			return jsonInto(b, &list)
		})
		if err != nil {
			k.anomaly("final", "firm", engineName(i), "no account list within 30 s of the run's end: %v", err)
			continue
		}
		for _, a := range k.W.Money {
			_, want, _ := k.logs[a.Number].at(^uint64(0), a.Start)
			for _, got := range list.Accounts {
				if got.AccountNumber == a.Number && got.Balance.Cmp(want) != 0 {
					k.anomaly("ledger", a.Number, engineName(i), "the account's balance reads %s; its ledger in the log says %s", got.Balance, want)
				}
			}
		}
	}
}

// write puts the history, the anomalies and a visualization of each illegal
// history in a new directory under $TMPDIR (kept after the test).
func (k *Checker) write() error {
	dir, err := os.MkdirTemp("", "jepsen-"+time.Now().UTC().Format("20060102T150405")+"-")
	if err != nil {
		return err
	}
	k.rep.Dir = dir
	if err := k.H.Write(filepath.Join(dir, "history.jsonl")); err != nil {
		return err
	}
	var b strings.Builder
	for _, a := range k.rep.Anomalies {
		b.WriteString(a.String() + "\n")
	}
	for _, a := range k.rep.Known {
		fmt.Fprintf(&b, "known (%s): %s\n", k.Known[a.Check], a)
	}
	for _, w := range k.Windows {
		fmt.Fprintf(&b, "fault %s: [%v, %v] %s\n", w.Fault, w.Start.Round(time.Millisecond), w.End.Round(time.Millisecond), w.Err)
	}
	if err := os.WriteFile(filepath.Join(dir, "anomalies.txt"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	for i, f := range k.failures {
		if i >= 20 {
			break
		}
		timeout := k.Timeout
		if timeout == 0 {
			timeout = time.Minute
		}
		_, info := porcupine.CheckOperationsVerbose(f.model, f.ops, timeout)
		name := strings.NewReplacer(" ", "-", "/", "_").Replace(f.name) + ".html"
		if err := porcupine.VisualizePath(f.model, info, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// Summary is the report in a few lines.
func (r *Report) Summary() string {
	var b strings.Builder
	kinds := make([]string, 0, len(r.Outcomes))
	for k := range r.Outcomes {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, kind := range kinds {
		var parts []string
		for _, o := range []string{OK, Dup, Refused, Fail, Unknown} {
			if n := r.Outcomes[kind][o]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", o, n))
			}
		}
		fmt.Fprintf(&b, "%s: %s\n", kind, strings.Join(parts, ", "))
	}
	fmt.Fprintf(&b, "porcupine: %d order histories (one per clientOrderId), %d balance histories; undecided within the bound: %d, %d\n",
		r.Histories["order"], r.Histories["balance"], r.Undecided["order"], r.Undecided["balance"])
	fmt.Fprintf(&b, "log: %d account commits; %d frames and %d receipts held to it; %d writes met an unknown outcome and settled, %d unsettled\n",
		r.Commits, r.Reads, r.Receipts, r.Settled, len(r.Unsettled))
	fmt.Fprintf(&b, "anomalies: %d; known and open: %d", len(r.Anomalies), len(r.Known))
	if r.Dir != "" {
		fmt.Fprintf(&b, " (history, anomalies and porcupine's visualizations in %s)", r.Dir)
	}
	return b.String()
}

func jsonInto(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %.200s", err, b)
	}
	return nil
}
