package tradovate

import (
	"sort"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // the CME trade date is read in America/Chicago

	"github.com/cockroachdb/apd/v3"
)

// The entity types below are the provider's JSON shapes (its OpenAPI specification's schemas of the
// same names). Optional fields the provider omits when empty are omitempty; decimals are *num, written
// as JSON numbers from their exact text.

type tradeDate struct {
	Year  int `json:"year"`
	Month int `json:"month"`
	Day   int `json:"day"`
}

type userEnt struct {
	ID           int64  `json:"id"`
	Name         string `json:"name"`
	Timestamp    string `json:"timestamp"`
	Email        string `json:"email"`
	Status       string `json:"status"`
	Professional bool   `json:"professional"`
}

type accountEnt struct {
	ID                int64  `json:"id"`
	Name              string `json:"name"`
	UserID            int64  `json:"userId"`
	AccountType       string `json:"accountType"`
	Active            bool   `json:"active"`
	ClearingHouseID   int64  `json:"clearingHouseId"`
	RiskCategoryID    int64  `json:"riskCategoryId"`
	AutoLiqProfileID  int64  `json:"autoLiqProfileId"`
	MarginAccountType string `json:"marginAccountType"`
	LegalStatus       string `json:"legalStatus"`
	Timestamp         string `json:"timestamp"`
	Readonly          bool   `json:"readonly"`
}

type cashBalanceEnt struct {
	ID              int64     `json:"id"`
	AccountID       int64     `json:"accountId"`
	Timestamp       string    `json:"timestamp"`
	TradeDate       tradeDate `json:"tradeDate"`
	CurrencyID      int64     `json:"currencyId"`
	Amount          *num      `json:"amount"`
	RealizedPnL     *num      `json:"realizedPnL,omitempty"`
	WeekRealizedPnL *num      `json:"weekRealizedPnL,omitempty"`
}

type positionEnt struct {
	ID          int64     `json:"id"`
	AccountID   int64     `json:"accountId"`
	ContractID  int64     `json:"contractId"`
	Timestamp   string    `json:"timestamp"`
	TradeDate   tradeDate `json:"tradeDate"`
	NetPos      int64     `json:"netPos"`
	NetPrice    *num      `json:"netPrice,omitempty"`
	Bought      int64     `json:"bought"`
	BoughtValue *num      `json:"boughtValue"`
	Sold        int64     `json:"sold"`
	SoldValue   *num      `json:"soldValue"`
	PrevPos     int64     `json:"prevPos"`
	PrevPrice   *num      `json:"prevPrice,omitempty"`
}

type orderEnt struct {
	ID                  int64  `json:"id"`
	AccountID           int64  `json:"accountId"`
	ContractID          int64  `json:"contractId"`
	Timestamp           string `json:"timestamp"`
	Action              string `json:"action"`
	OrdStatus           string `json:"ordStatus"`
	ExecutionProviderID int64  `json:"executionProviderId,omitempty"`
	OcoID               int64  `json:"ocoId,omitempty"`
	ParentID            int64  `json:"parentId,omitempty"`
	LinkedID            int64  `json:"linkedId,omitempty"`
	Admin               bool   `json:"admin"`
}

type orderVersionEnt struct {
	ID          int64  `json:"id"`
	OrderID     int64  `json:"orderId"`
	OrderQty    int64  `json:"orderQty"`
	OrderType   string `json:"orderType"`
	Price       *num   `json:"price,omitempty"`
	StopPrice   *num   `json:"stopPrice,omitempty"`
	TimeInForce string `json:"timeInForce,omitempty"`
	ExpireTime  string `json:"expireTime,omitempty"`
	Text        string `json:"text,omitempty"`
}

type commandEnt struct {
	ID             int64  `json:"id"`
	OrderID        int64  `json:"orderId"`
	Timestamp      string `json:"timestamp"`
	ClOrdID        string `json:"clOrdId,omitempty"`
	CommandType    string `json:"commandType"`
	CommandStatus  string `json:"commandStatus"`
	SenderID       int64  `json:"senderId,omitempty"`
	UserSessionID  int64  `json:"userSessionId,omitempty"`
	ActivationTime string `json:"activationTime,omitempty"`
	CustomTag50    string `json:"customTag50,omitempty"`
	IsAutomated    bool   `json:"isAutomated"`
}

type commandReportEnt struct {
	ID            int64  `json:"id"`
	CommandID     int64  `json:"commandId"`
	Timestamp     string `json:"timestamp"`
	CommandStatus string `json:"commandStatus"`
	RejectReason  string `json:"rejectReason,omitempty"`
	Text          string `json:"text,omitempty"`
	OrdStatus     string `json:"ordStatus,omitempty"`
}

type executionReportEnt struct {
	ID           int64      `json:"id"`
	CommandID    int64      `json:"commandId"`
	Name         string     `json:"name"`
	AccountID    int64      `json:"accountId"`
	ContractID   int64      `json:"contractId"`
	Timestamp    string     `json:"timestamp"`
	TradeDate    *tradeDate `json:"tradeDate,omitempty"`
	OrderID      int64      `json:"orderId"`
	ExecType     string     `json:"execType"`
	ExecRefID    string     `json:"execRefId,omitempty"`
	OrdStatus    string     `json:"ordStatus"`
	Action       string     `json:"action"`
	CumQty       int64      `json:"cumQty"`
	AvgPx        *num       `json:"avgPx,omitempty"`
	LastQty      int64      `json:"lastQty,omitempty"`
	LastPx       *num       `json:"lastPx,omitempty"`
	RejectReason string     `json:"rejectReason,omitempty"`
	Text         string     `json:"text,omitempty"`
}

type fillEnt struct {
	ID            int64     `json:"id"`
	OrderID       int64     `json:"orderId"`
	ContractID    int64     `json:"contractId"`
	Timestamp     string    `json:"timestamp"`
	TradeDate     tradeDate `json:"tradeDate"`
	Action        string    `json:"action"`
	Qty           int64     `json:"qty"`
	Price         *num      `json:"price"`
	Active        bool      `json:"active"`
	FinallyPaired int64     `json:"finallyPaired"`
}

type fillPairEnt struct {
	ID         int64 `json:"id"`
	PositionID int64 `json:"positionId"`
	BuyFillID  int64 `json:"buyFillId"`
	SellFillID int64 `json:"sellFillId"`
	Qty        int64 `json:"qty"`
	BuyPrice   *num  `json:"buyPrice"`
	SellPrice  *num  `json:"sellPrice"`
	Active     bool  `json:"active"`
}

type productEnt struct {
	ID              int64  `json:"id"`
	Name            string `json:"name"`
	CurrencyID      int64  `json:"currencyId"`
	ProductType     string `json:"productType"`
	Description     string `json:"description"`
	ExchangeID      int64  `json:"exchangeId"`
	ContractGroupID int64  `json:"contractGroupId"`
	Status          string `json:"status"`
	Months          string `json:"months"`
	IsSecured       bool   `json:"isSecured"`
	ValuePerPoint   *num   `json:"valuePerPoint"`
	PriceFormatType string `json:"priceFormatType"`
	PriceFormat     int    `json:"priceFormat"`
	TickSize        *num   `json:"tickSize"`
}

type contractEnt struct {
	ID                 int64  `json:"id"`
	Name               string `json:"name"`
	ContractMaturityID int64  `json:"contractMaturityId"`
	Timestamp          string `json:"timestamp"`
}

type maturityEnt struct {
	ID              int64  `json:"id"`
	ProductID       int64  `json:"productId"`
	ExpirationMonth int    `json:"expirationMonth"`
	ExpirationDate  string `json:"expirationDate"`
	FirstIntentDate string `json:"firstIntentDate,omitempty"`
	IsFront         bool   `json:"isFront"`
}

type namedEnt struct {
	ID     int64  `json:"id"`
	Name   string `json:"name"`
	Symbol string `json:"symbol,omitempty"`
}

// usdID is the one currency: every product is in US dollars.
const usdID = 1

// contractGroupID is the one contract group every product belongs to.
const contractGroupID = 1

// ts writes a time as the provider does: "2016-11-04T00:02:36.626Z".
func ts(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

var chicago = func() *time.Location {
	l, err := time.LoadLocation("America/Chicago")
	if err != nil {
		return time.FixedZone("CST", -6*3600)
	}
	return l
}()

// sessionDate is the CME trade date of t: the session opening at 17:00 Chicago time belongs to the
// next day, and Saturday and Sunday belong to Monday.
func sessionDate(t time.Time) time.Time {
	c := t.In(chicago)
	d := time.Date(c.Year(), c.Month(), c.Day(), 0, 0, 0, 0, time.UTC)
	if c.Hour() >= 17 {
		d = d.AddDate(0, 0, 1)
	}
	for d.Weekday() == time.Saturday || d.Weekday() == time.Sunday {
		d = d.AddDate(0, 0, 1)
	}
	return d
}

func tradeDateOf(t time.Time) tradeDate {
	d := sessionDate(t)
	return tradeDate{Year: d.Year(), Month: int(d.Month()), Day: d.Day()}
}

// tdNumber is a trade date as the chart events write it: 20170413.
func tdNumber(t time.Time) int {
	d := sessionDate(t)
	return d.Year()*10000 + int(d.Month())*100 + d.Day()
}

// entityOps answers the provider's shared read operations on one entity type for one user:
// list, item?id=, items?ids=, deps?masterid=, ldeps?masterids=, find?name=, suggest?t=&l=.
type entityOps struct {
	all    func(s *Sim, u *user) []entity
	master func(e entity) int64
	name   func(e entity) string
}

// entity is one of the provider's entities, identified by its id.
type entity interface{ entID() int64 }

func (e *userEnt) entID() int64            { return e.ID }
func (e *accountEnt) entID() int64         { return e.ID }
func (e *cashBalanceEnt) entID() int64     { return e.ID }
func (e *positionEnt) entID() int64        { return e.ID }
func (e *orderEnt) entID() int64           { return e.ID }
func (e *orderVersionEnt) entID() int64    { return e.ID }
func (e *commandEnt) entID() int64         { return e.ID }
func (e *commandReportEnt) entID() int64   { return e.ID }
func (e *executionReportEnt) entID() int64 { return e.ID }
func (e *fillEnt) entID() int64            { return e.ID }
func (e *fillPairEnt) entID() int64        { return e.ID }
func (e *productEnt) entID() int64         { return e.ID }
func (e *contractEnt) entID() int64        { return e.ID }
func (e *maturityEnt) entID() int64        { return e.ID }
func (e *namedEnt) entID() int64           { return e.ID }

func asList[T entity](in []T) []entity {
	out := make([]entity, len(in))
	for i, e := range in {
		out[i] = e
	}
	return out
}

// entityKinds are the entity types the simulator serves, by the provider's entity name in lower
// case (the REST path's first part).
var entityKinds = map[string]entityOps{
	"user": {all: func(s *Sim, u *user) []entity { return []entity{s.userEntity(u)} }},
	"account": {all: func(s *Sim, u *user) []entity {
		var out []entity
		for _, a := range u.accounts {
			out = append(out, a.ent)
		}
		return out
	}, name: func(e entity) string { return e.(*accountEnt).Name }},
	"cashbalance": {all: func(s *Sim, u *user) []entity {
		var out []entity
		for _, a := range u.accounts {
			out = append(out, s.cashEntity(a))
		}
		return out
	}, master: func(e entity) int64 { return e.(*cashBalanceEnt).AccountID }},
	"position": {all: func(s *Sim, u *user) []entity {
		var out []entity
		for _, a := range u.accounts {
			for _, p := range a.positionList() {
				out = append(out, p.ent)
			}
		}
		return out
	}, master: func(e entity) int64 { return e.(*positionEnt).AccountID }},
	"order": {all: func(s *Sim, u *user) []entity {
		out := make([]entity, 0, len(u.orders))
		for _, o := range u.orders {
			out = append(out, o.ent)
		}
		return out
	}, master: func(e entity) int64 { return e.(*orderEnt).AccountID }},
	"orderversion":    {all: func(_ *Sim, u *user) []entity { return asList(u.versions) }, master: func(e entity) int64 { return e.(*orderVersionEnt).OrderID }},
	"command":         {all: func(_ *Sim, u *user) []entity { return asList(u.commands) }, master: func(e entity) int64 { return e.(*commandEnt).OrderID }},
	"commandreport":   {all: func(_ *Sim, u *user) []entity { return asList(u.commandReports) }, master: func(e entity) int64 { return e.(*commandReportEnt).CommandID }},
	"executionreport": {all: func(_ *Sim, u *user) []entity { return asList(u.execReports) }, master: func(e entity) int64 { return e.(*executionReportEnt).CommandID }},
	"fill":            {all: func(_ *Sim, u *user) []entity { return asList(u.fills) }, master: func(e entity) int64 { return e.(*fillEnt).OrderID }},
	"fillpair":        {all: func(_ *Sim, u *user) []entity { return asList(u.fillPairs) }, master: func(e entity) int64 { return e.(*fillPairEnt).PositionID }},
	"product": {all: func(s *Sim, _ *user) []entity { return asList(s.productEntities()) },
		master: func(e entity) int64 { return e.(*productEnt).ExchangeID }, name: func(e entity) string { return e.(*productEnt).Name }},
	"contract": {all: func(s *Sim, _ *user) []entity { return asList(s.contractEntities()) },
		master: func(e entity) int64 { return e.(*contractEnt).ContractMaturityID }, name: func(e entity) string { return e.(*contractEnt).Name }},
	"contractmaturity": {all: func(s *Sim, _ *user) []entity { return asList(s.maturityEntities()) },
		master: func(e entity) int64 { return e.(*maturityEnt).ProductID }},
	"exchange": {all: func(s *Sim, _ *user) []entity { return asList(s.exchangeEntities()) },
		name: func(e entity) string { return e.(*namedEnt).Name }},
	"currency": {all: func(*Sim, *user) []entity { return []entity{&namedEnt{ID: usdID, Name: "USD", Symbol: "$"}} },
		name: func(e entity) string { return e.(*namedEnt).Name }},
	"contractgroup": {all: func(*Sim, *user) []entity { return []entity{&namedEnt{ID: contractGroupID, Name: "Futures"}} },
		name: func(e entity) string { return e.(*namedEnt).Name }},
}

// entityRead answers a shared read operation op on kind, with s.mu held. A missing item or find
// answers 404, as the provider documents for item.
func (s *Sim) entityRead(u *user, kind, op string, q map[string]string) answer {
	ops := entityKinds[kind]
	all := ops.all(s, u)
	sort.SliceStable(all, func(i, j int) bool { return all[i].entID() < all[j].entID() })
	switch op {
	case "list":
		return ok(all)
	case "item":
		id, err := strconv.ParseInt(q["id"], 10, 64)
		if err != nil {
			return badRequest("No usable value for id")
		}
		for _, e := range all {
			if e.entID() == id {
				return ok(e)
			}
		}
		return notFound(kind + " not found")
	case "items", "ldeps":
		param := "ids"
		if op == "ldeps" {
			param = "masterids"
		}
		want := map[int64]bool{}
		for _, f := range strings.Split(q[param], ",") {
			id, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
			if err != nil {
				return badRequest("No usable value for " + param)
			}
			want[id] = true
		}
		out := []entity{}
		for _, e := range all {
			if op == "items" && want[e.entID()] || op == "ldeps" && ops.master != nil && want[ops.master(e)] {
				out = append(out, e)
			}
		}
		return ok(out)
	case "deps":
		if ops.master == nil {
			return notFound("no such operation")
		}
		id, err := strconv.ParseInt(q["masterid"], 10, 64)
		if err != nil {
			return badRequest("No usable value for masterid")
		}
		out := []entity{}
		for _, e := range all {
			if ops.master(e) == id {
				out = append(out, e)
			}
		}
		return ok(out)
	case "find":
		if ops.name == nil {
			return notFound("no such operation")
		}
		name := q["name"]
		if name == "" {
			return badRequest("No usable value for name")
		}
		for _, e := range all {
			if strings.EqualFold(ops.name(e), name) {
				return ok(e)
			}
		}
		return notFound(kind + " not found")
	case "suggest":
		if ops.name == nil {
			return notFound("no such operation")
		}
		t := strings.ToUpper(q["t"])
		l, err := strconv.Atoi(q["l"])
		if err != nil || l <= 0 {
			return badRequest("No usable value for l")
		}
		out := []entity{}
		now := s.now()
		for _, e := range all {
			if ce, isContract := e.(*contractEnt); isContract {
				if c := s.contractsByID[ce.ID]; c != nil && c.expired(now) {
					continue
				}
			}
			if strings.Contains(strings.ToUpper(ops.name(e)), t) {
				out = append(out, e)
				if len(out) == l {
					break
				}
			}
		}
		return ok(out)
	}
	return notFound("no such operation")
}

func (s *Sim) userEntity(u *user) *userEnt {
	return &userEnt{ID: u.id, Name: u.name, Timestamp: ts(u.created), Email: u.email, Status: "Active"}
}

func (s *Sim) productEntities() []*productEnt {
	out := make([]*productEnt, 0, len(s.productOrder))
	for _, n := range s.productOrder {
		out = append(out, s.products[n].entity())
	}
	return out
}

func (p *product) entity() *productEnt {
	return &productEnt{ID: p.id, Name: p.spec.Name, CurrencyID: usdID, ProductType: "Futures", Description: p.spec.Description,
		ExchangeID: p.exchangeID, ContractGroupID: contractGroupID, Status: "Verified", Months: p.spec.Months,
		ValuePerPoint: dnum(p.vpp), PriceFormatType: p.spec.PriceFormatType, PriceFormat: p.spec.PriceFormat, TickSize: dnum(p.tick)}
}

func (s *Sim) contractEntities() []*contractEnt {
	var out []*contractEnt
	for _, n := range s.productOrder {
		for _, c := range s.products[n].contracts {
			out = append(out, c.entity())
		}
	}
	return out
}

func (c *contract) entity() *contractEnt {
	return &contractEnt{ID: c.id, Name: c.name, ContractMaturityID: c.maturityID, Timestamp: ts(c.created)}
}

func (s *Sim) maturityEntities() []*maturityEnt {
	now := s.now()
	var out []*maturityEnt
	for _, n := range s.productOrder {
		p := s.products[n]
		front := p.front(now)
		for _, c := range p.contracts {
			out = append(out, c.maturity(c == front))
		}
	}
	return out
}

func (c *contract) maturity(front bool) *maturityEnt {
	m := &maturityEnt{ID: c.maturityID, ProductID: c.prod.id, ExpirationMonth: int(c.month),
		ExpirationDate: ts(c.expiration), IsFront: front}
	if !c.firstIntent.IsZero() {
		m.FirstIntentDate = ts(c.firstIntent)
	}
	return m
}

func (s *Sim) exchangeEntities() []*namedEnt {
	out := make([]*namedEnt, 0, len(s.exchanges))
	for name, id := range s.exchanges {
		out = append(out, &namedEnt{ID: id, Name: name})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// moneyOrNil is d when it is not zero, else nil (a field the provider leaves out).
func moneyOrNil(d *apd.Decimal) *num {
	if d == nil || d.IsZero() {
		return nil
	}
	return dnum(d)
}
