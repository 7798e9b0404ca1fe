package tradovate

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svc/engine/sim/internal/dec"
)

// Product is one futures product the simulator lists, as a test configures it. Prices, tick sizes
// and money are decimal strings.
type Product struct {
	Name        string `json:"name"`        // "ES"
	Description string `json:"description"` // "E-Mini S&P 500"
	Exchange    string `json:"exchange"`    // "CME"
	TickSize    string `json:"tickSize"`    // "0.25"; "0.015625" (a half of a 32nd) for ZN
	// ValuePerPoint is the money one point of price is worth per contract ("50" for ES).
	ValuePerPoint string `json:"valuePerPoint"`
	// PriceFormatType is "Decimal" or "Fractional" (32nds products such as ZN), and PriceFormat the
	// provider's integer beside it. The docs define neither value's encoding; the defaults are -2
	// for two-decimal products and -5 (fractions of 2^-5, 32nds) for ZN.
	PriceFormatType string `json:"priceFormatType"`
	PriceFormat     int    `json:"priceFormat"`
	Months          string `json:"months"` // listed month codes, "HMUZ"
	Price           string `json:"price"`  // the starting price of every listed month
	// InitialMargin and MaintenanceMargin are per contract, for the cash balance snapshot.
	InitialMargin     string `json:"initialMargin"`
	MaintenanceMargin string `json:"maintenanceMargin"`
	// Schedule says how expiration and roll dates are computed: "equity" (third Friday; roll eight
	// days before) or "treasury" (seven business days before the month's last business day; first
	// intent on the previous month's last business day; roll one business day before it).
	Schedule string `json:"schedule"`
	// Contracts is how many months are listed from the simulator's start; 3 when zero.
	Contracts int `json:"contracts,omitempty"`
}

// DefaultProducts are the products a simulator lists unless Options.Products says otherwise: the
// equity index futures ES, MES and NQ and the 10-year note ZN, quoted in 32nds. Margins are round
// figures of the simulator's own, not the exchange's.
func DefaultProducts() []Product {
	return []Product{
		{Name: "ES", Description: "E-Mini S&P 500", Exchange: "CME", TickSize: "0.25", ValuePerPoint: "50",
			PriceFormatType: "Decimal", PriceFormat: -2, Months: "HMUZ", Price: "5000",
			InitialMargin: "13000", MaintenanceMargin: "12000", Schedule: "equity"},
		{Name: "MES", Description: "Micro E-Mini S&P 500", Exchange: "CME", TickSize: "0.25", ValuePerPoint: "5",
			PriceFormatType: "Decimal", PriceFormat: -2, Months: "HMUZ", Price: "5000",
			InitialMargin: "1300", MaintenanceMargin: "1200", Schedule: "equity"},
		{Name: "NQ", Description: "E-Mini NASDAQ 100", Exchange: "CME", TickSize: "0.25", ValuePerPoint: "20",
			PriceFormatType: "Decimal", PriceFormat: -2, Months: "HMUZ", Price: "18000",
			InitialMargin: "19000", MaintenanceMargin: "17500", Schedule: "equity"},
		{Name: "ZN", Description: "10-Year U.S. Treasury Note", Exchange: "CBOT", TickSize: "0.015625", ValuePerPoint: "1000",
			PriceFormatType: "Fractional", PriceFormat: -5, Months: "HMUZ", Price: "110.5",
			InitialMargin: "2200", MaintenanceMargin: "2000", Schedule: "treasury"},
	}
}

func (p Product) validate() error {
	var errs []error
	if p.Name == "" || strings.ToUpper(p.Name) != p.Name || len(p.Name) > 8 {
		errs = append(errs, fmt.Errorf("product %q: name must be 1 to 8 upper-case characters", p.Name))
	}
	for _, f := range []struct{ name, v string }{{"tickSize", p.TickSize}, {"valuePerPoint", p.ValuePerPoint},
		{"price", p.Price}, {"initialMargin", p.InitialMargin}, {"maintenanceMargin", p.MaintenanceMargin}} {
		margin := f.name == "initialMargin" || f.name == "maintenanceMargin"
		if d, ok := dec.Parse(f.v); !ok || d.Negative || (!margin && d.IsZero()) {
			what := "a positive decimal"
			if margin {
				what = "a non-negative decimal"
			}
			errs = append(errs, fmt.Errorf("product %s: %s %q is not %s", p.Name, f.name, f.v, what))
		}
	}
	if t, ok := dec.Parse(p.TickSize); ok && !t.IsZero() {
		if px, ok := dec.Parse(p.Price); ok && !dec.IsMultiple(px, t) {
			errs = append(errs, fmt.Errorf("product %s: price %s is not a multiple of the tick %s", p.Name, p.Price, p.TickSize))
		}
	}
	if p.PriceFormatType != "Decimal" && p.PriceFormatType != "Fractional" {
		errs = append(errs, fmt.Errorf("product %s: priceFormatType must be Decimal or Fractional", p.Name))
	}
	if p.Months == "" {
		errs = append(errs, fmt.Errorf("product %s: months are required", p.Name))
	}
	for _, c := range p.Months {
		if monthOfCode(c) == 0 {
			errs = append(errs, fmt.Errorf("product %s: %q is not a month code", p.Name, c))
		}
	}
	if p.Schedule != "equity" && p.Schedule != "treasury" {
		errs = append(errs, fmt.Errorf("product %s: schedule must be equity or treasury", p.Name))
	}
	if p.Contracts < 0 || p.Contracts > 12 {
		errs = append(errs, fmt.Errorf("product %s: contracts must be 0 to 12", p.Name))
	}
	return errors.Join(errs...)
}

const monthCodes = "FGHJKMNQUVXZ"

func monthOfCode(c rune) time.Month {
	i := strings.IndexRune(monthCodes, c)
	if i < 0 {
		return 0
	}
	return time.Month(i + 1)
}

// product is a listed Product with its ids and contract months.
type product struct {
	spec                  Product
	id, exchangeID        int64
	tick, vpp, im, mm     *apd.Decimal
	contracts             []*contract // by expiration
	created               time.Time
	exchangeName, groupNm string
}

// contract is one listed month ("ESZ6") with its maturity and its market.
type contract struct {
	id, maturityID int64
	name           string
	prod           *product
	month          time.Month
	year           int
	expiration     time.Time
	firstIntent    time.Time // zero unless the schedule has one
	roll           time.Time // from this time on the next month is the one to trade
	created        time.Time
	mkt            *market
}

func (c *contract) expired(now time.Time) bool { return !now.Before(c.expiration) }

// listContracts computes the months of p listed at now: the first n months whose expiration is
// after now, in the product's month cycle.
func listContracts(p Product, now time.Time) []contractDates {
	n := p.Contracts
	if n == 0 {
		n = 3
	}
	var out []contractDates
	for y := now.Year(); len(out) < n && y < now.Year()+5; y++ {
		for _, c := range p.Months {
			m := monthOfCode(c)
			d := datesFor(p.Schedule, y, m)
			if !d.expiration.After(now) {
				continue
			}
			d.name = fmt.Sprintf("%s%c%d", p.Name, c, y%10)
			d.year, d.month = y, m
			out = append(out, d)
			if len(out) == n {
				break
			}
		}
	}
	return out
}

type contractDates struct {
	name                          string
	year                          int
	month                         time.Month
	expiration, firstIntent, roll time.Time
}

func datesFor(schedule string, y int, m time.Month) contractDates {
	switch schedule {
	case "treasury":
		last := lastBusinessDay(y, m)
		exp := addBusinessDays(last, -7).Add(17 * time.Hour)
		py, pm := y, m-1
		if pm == 0 {
			py, pm = y-1, 12
		}
		fi := lastBusinessDay(py, pm)
		return contractDates{expiration: exp, firstIntent: fi, roll: addBusinessDays(fi, -1)}
	default:
		exp := thirdFriday(y, m).Add(13*time.Hour + 30*time.Minute)
		return contractDates{expiration: exp, roll: exp.AddDate(0, 0, -8).Truncate(24 * time.Hour)}
	}
}

func thirdFriday(y int, m time.Month) time.Time {
	d := time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
	for d.Weekday() != time.Friday {
		d = d.AddDate(0, 0, 1)
	}
	return d.AddDate(0, 0, 14)
}

func lastBusinessDay(y int, m time.Month) time.Time {
	d := time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, -1)
	for d.Weekday() == time.Saturday || d.Weekday() == time.Sunday {
		d = d.AddDate(0, 0, -1)
	}
	return d
}

// addBusinessDays moves d by n weekdays (n may be negative).
func addBusinessDays(d time.Time, n int) time.Time {
	step := 1
	if n < 0 {
		step, n = -1, -n
	}
	for n > 0 {
		d = d.AddDate(0, 0, step)
		if d.Weekday() != time.Saturday && d.Weekday() != time.Sunday {
			n--
		}
	}
	return d
}

// addProduct lists p and its months with s.mu held.
func (s *Sim) addProduct(p Product, now time.Time) {
	exName := p.Exchange
	if exName == "" {
		exName = "CME"
	}
	exID, ok := s.exchanges[exName]
	if !ok {
		exID = s.nextID(kindExchange)
		s.exchanges[exName] = exID
	}
	pr := &product{spec: p, id: s.nextID(kindProduct), exchangeID: exID, tick: dec.Must(p.TickSize),
		vpp: dec.Must(p.ValuePerPoint), im: dec.Must(p.InitialMargin), mm: dec.Must(p.MaintenanceMargin),
		created: now, exchangeName: exName}
	s.products[p.Name] = pr
	s.productOrder = append(s.productOrder, p.Name)
	for _, d := range listContracts(p, now) {
		c := &contract{id: s.nextID(kindContract), maturityID: s.nextID(kindMaturity), name: d.name, prod: pr,
			month: d.month, year: d.year, expiration: d.expiration, firstIntent: d.firstIntent, roll: d.roll, created: now}
		c.mkt = newMarket(dec.Must(p.Price), now, s.opts.HistoryBars)
		pr.contracts = append(pr.contracts, c)
		s.contracts[c.name] = c
		s.contractsByID[c.id] = c
	}
}

// front is the month whose expiration comes first after now: the provider's isFront, which
// changes only when the front month expires.
func (p *product) front(now time.Time) *contract {
	for _, c := range p.contracts {
		if !c.expired(now) {
			return c
		}
	}
	return nil
}

// best is the month to trade at now: the first whose roll date is after now (what
// contract/rollcontract answers for a product name).
func (p *product) best(now time.Time) *contract {
	for _, c := range p.contracts {
		if now.Before(c.roll) && !c.expired(now) {
			return c
		}
	}
	return p.front(now)
}

// lookupContract finds a contract by its name ("ESZ6") or, for a product name ("ES"), the month to
// trade now; s.mu held.
func (s *Sim) lookupContract(name string, now time.Time) *contract {
	if c, ok := s.contracts[strings.ToUpper(name)]; ok {
		return c
	}
	if p, ok := s.products[strings.ToUpper(name)]; ok {
		return p.best(now)
	}
	return nil
}

// SetRollDate moves the roll date of a listed month: from that time on, contract/rollcontract for
// its product answers the next month. A zero time rolls now.
func (s *Sim) SetRollDate(contractName string, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, at, err := s.listedAt("roll", contractName, at)
	if err != nil {
		return err
	}
	c.roll = at
	return nil
}

// listedAt is a listed month by name and at, a zero time meaning now, with s.mu held; what names the
// change in the error.
func (s *Sim) listedAt(what, contractName string, at time.Time) (*contract, time.Time, error) {
	c, ok := s.contracts[strings.ToUpper(contractName)]
	if !ok {
		return nil, at, fmt.Errorf("%s: no contract %q", what, contractName)
	}
	if at.IsZero() {
		at = s.now()
	}
	return c, at, nil
}

// SetExpiration moves the expiration of a listed month; a zero time expires it now. An expired month
// is no longer the front month and refuses new orders.
func (s *Sim) SetExpiration(contractName string, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, at, err := s.listedAt("expiration", contractName, at)
	if err != nil {
		return err
	}
	c.expiration = at
	sort.SliceStable(c.prod.contracts, func(i, j int) bool {
		return c.prod.contracts[i].expiration.Before(c.prod.contracts[j].expiration)
	})
	return nil
}

// Contracts lists the names of the listed months of a product, nearest first.
func (s *Sim) Contracts(productName string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.products[strings.ToUpper(productName)]
	if !ok {
		return nil
	}
	out := make([]string, 0, len(p.contracts))
	for _, c := range p.contracts {
		out = append(out, c.name)
	}
	return out
}

// FrontContract is the month of a product to trade now (the answer of contract/rollcontract).
func (s *Sim) FrontContract(productName string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.products[strings.ToUpper(productName)]
	if !ok {
		return ""
	}
	if c := p.best(s.now()); c != nil {
		return c.name
	}
	return ""
}

// rollContract answers contract/rollcontract: for a product name the month to trade now; for a
// contract name the next (forward) or previous month, or the same month when ifExpired is set and it
// has not expired. The docs define only "the best upcoming maturity"; these are the simulator's rules.
func (s *Sim) rollContract(body []byte, now time.Time) answer {
	var p struct {
		Name      string `json:"name"`
		Forward   *bool  `json:"forward"`
		IfExpired bool   `json:"ifExpired"`
	}
	if a := decodeBody(body, &p); a != nil {
		return *a
	}
	if p.Name == "" {
		return badRequest("No usable value for name")
	}
	if p.Forward == nil {
		return badRequest("No usable value for forward")
	}
	name := strings.ToUpper(p.Name)
	if pr, isProduct := s.products[name]; isProduct {
		if c := pr.best(now); c != nil {
			return ok(map[string]any{"contract": c.entity()})
		}
		return ok(map[string]any{"errorText": "No contract to roll to"})
	}
	c := s.contracts[name]
	if c == nil {
		return ok(map[string]any{"errorText": "Unknown contract " + p.Name})
	}
	if p.IfExpired && !c.expired(now) {
		return ok(map[string]any{"contract": c.entity()})
	}
	list := c.prod.contracts
	for i, x := range list {
		if x != c {
			continue
		}
		j := i + 1
		if !*p.Forward {
			j = i - 1
		}
		if j >= 0 && j < len(list) {
			return ok(map[string]any{"contract": list[j].entity()})
		}
	}
	return ok(map[string]any{"errorText": "No contract to roll to"})
}
