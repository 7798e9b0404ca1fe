package tradovate

import (
	"bytes"
	"errors"
	"strconv"
	"time"

	"github.com/svc/engine/events"
)

// The wire types are the API's documented shapes (the REST reference's
// schemas: AccessTokenResponse, Account, CashBalanceSnapshot, Position,
// Order, OrderVersion, Command, ExecutionReport, Fill, Contract,
// ContractMaturity, Product, PlaceOrder, PlaceOrderResult, ModifyOrder,
// CancelOrder, CommandResult), with the fields the adapter reads or sends.
// Every number of a price or quantity is a num: read from the JSON number's
// text exactly, written as a JSON number, never through float.

// errMalformed is an answer of the API the adapter cannot read.
var errMalformed = errors.New("tradovate: malformed answer")

// num is a decimal the API writes as a JSON number. Null or absent is
// unset (ok false). It is written as a JSON number (the API's type is
// number), from the decimal's exact text.
type num struct {
	d  events.Decimal
	ok bool
}

func numOf(d events.Decimal) num { return num{d: d, ok: true} }

// UnmarshalJSON reads a JSON number (or a decimal string) exactly.
func (n *num) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		*n = num{}
		return nil
	}
	var d events.Decimal
	if err := d.UnmarshalJSON(b); err != nil {
		return errMalformed
	}
	*n = num{d: d, ok: true}
	return nil
}

// MarshalJSON writes the decimal as a JSON number, or null when unset.
func (n num) MarshalJSON() ([]byte, error) {
	if !n.ok {
		return []byte("null"), nil
	}
	return []byte(n.d.String()), nil
}

// dec is the value, zero when unset.
func (n num) dec() events.Decimal { return n.d }

// ptr is the value, nil when unset.
func (n num) ptr() *events.Decimal {
	if !n.ok {
		return nil
	}
	d := n.d
	return &d
}

// eid is one of the API's int64 entity ids; it reads a JSON number or a
// numeric string (null: 0), and names itself in decimal.
type eid int64

func (i eid) String() string { return strconv.FormatInt(int64(i), 10) }

// UnmarshalJSON reads the id.
func (i *eid) UnmarshalJSON(b []byte) error {
	b = bytes.Trim(bytes.TrimSpace(b), `"`)
	if string(b) == "null" || len(b) == 0 {
		*i = 0
		return nil
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return errMalformed
	}
	*i = eid(n)
	return nil
}

// parseID reads an id the engine holds as text.
func parseID(s string) (eid, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return eid(n), err == nil && n > 0
}

// accessTokenRequest is POST /auth/accesstokenrequest's body. The password
// is never in it: the body is written by tokenBody, which takes the
// password as bytes and writes it straight into a buffer the caller wipes.
type accessTokenRequest struct {
	Name       string `json:"name"`
	AppID      string `json:"appId,omitempty"`
	AppVersion string `json:"appVersion,omitempty"`
	DeviceID   string `json:"deviceId,omitempty"`
	CID        string `json:"cid,omitempty"`
	Sec        string `json:"sec,omitempty"`
}

// accessTokenResponse is AccessTokenResponse (the answer of
// accesstokenrequest and renewaccesstoken). mdAccessToken is in the
// documentation's examples, not in the schema.
type accessTokenResponse struct {
	ErrorText      string    `json:"errorText"`
	AccessToken    string    `json:"accessToken"`
	MDAccessToken  string    `json:"mdAccessToken"`
	ExpirationTime time.Time `json:"expirationTime"`
	UserStatus     string    `json:"userStatus"`
	UserID         eid       `json:"userId"`
	Name           string    `json:"name"`
	HasLive        bool      `json:"hasLive"`
}

// penalty is a p-ticket answer: HTTP 200 (or a socket answer) carrying the
// ticket, the seconds to wait and whether a captcha is demanded instead of
// the result.
type penalty struct {
	Ticket  string `json:"p-ticket"`
	Time    num    `json:"p-time"`
	Captcha bool   `json:"p-captcha"`
}

// account is Account.
type account struct {
	ID              eid    `json:"id"`
	Name            string `json:"name"`
	UserID          eid    `json:"userId"`
	AccountType     string `json:"accountType"`
	Active          *bool  `json:"active"` // not in the schema; read when sent
	Restricted      bool   `json:"restricted"`
	Closed          bool   `json:"closed"`
	Readonly        bool   `json:"readonly"`
	FuturesDisabled bool   `json:"futuresDisabled"`
}

// cashBalanceSnapshot is CashBalanceSnapshot.
type cashBalanceSnapshot struct {
	ErrorText      string `json:"errorText"`
	TotalCashValue num    `json:"totalCashValue"`
	NetLiq         num    `json:"netLiq"`
	OpenPnL        num    `json:"openPnL"`
	RealizedPnL    num    `json:"realizedPnL"`
	InitialMargin  num    `json:"initialMargin"`
}

// cashBalance is CashBalance (the entity the user-data stream sends).
type cashBalance struct {
	ID          eid       `json:"id"`
	AccountID   eid       `json:"accountId"`
	Timestamp   time.Time `json:"timestamp"`
	CurrencyID  eid       `json:"currencyId"`
	Amount      num       `json:"amount"`
	RealizedPnL num       `json:"realizedPnL"`
}

// position is Position.
type position struct {
	ID         eid       `json:"id"`
	AccountID  eid       `json:"accountId"`
	ContractID eid       `json:"contractId"`
	Timestamp  time.Time `json:"timestamp"`
	NetPos     num       `json:"netPos"`
	NetPrice   num       `json:"netPrice"`
}

// order is Order.
type order struct {
	ID         eid       `json:"id"`
	AccountID  eid       `json:"accountId"`
	ContractID eid       `json:"contractId"`
	Timestamp  time.Time `json:"timestamp"`
	Action     string    `json:"action"`
	OrdStatus  string    `json:"ordStatus"`
	OcoID      eid       `json:"ocoId"`
	ParentID   eid       `json:"parentId"`
}

// orderVersion is OrderVersion: an order's terms; a modify adds a version.
type orderVersion struct {
	ID          eid    `json:"id"`
	OrderID     eid    `json:"orderId"`
	OrderQty    num    `json:"orderQty"`
	OrderType   string `json:"orderType"`
	Price       num    `json:"price"`
	StopPrice   num    `json:"stopPrice"`
	TimeInForce string `json:"timeInForce"`
	Text        string `json:"text"`
}

// command is Command: a New, Modify or Cancel of an order, with the
// client's clOrdId.
type command struct {
	ID            eid       `json:"id"`
	OrderID       eid       `json:"orderId"`
	Timestamp     time.Time `json:"timestamp"`
	ClOrdID       string    `json:"clOrdId"`
	CommandType   string    `json:"commandType"`
	CommandStatus string    `json:"commandStatus"`
}

// executionReport is ExecutionReport.
type executionReport struct {
	ID           eid       `json:"id"`
	CommandID    eid       `json:"commandId"`
	AccountID    eid       `json:"accountId"`
	ContractID   eid       `json:"contractId"`
	Timestamp    time.Time `json:"timestamp"`
	OrderID      eid       `json:"orderId"`
	ExecType     string    `json:"execType"`
	OrdStatus    string    `json:"ordStatus"`
	Action       string    `json:"action"`
	CumQty       num       `json:"cumQty"`
	AvgPx        num       `json:"avgPx"`
	RejectReason string    `json:"rejectReason"`
}

// fill is Fill. Active false: the fill was busted.
type fill struct {
	ID         eid       `json:"id"`
	OrderID    eid       `json:"orderId"`
	ContractID eid       `json:"contractId"`
	Timestamp  time.Time `json:"timestamp"`
	Action     string    `json:"action"`
	Qty        num       `json:"qty"`
	Price      num       `json:"price"`
	Active     *bool     `json:"active"`
}

func (f fill) active() bool { return f.Active == nil || *f.Active }

// contract is Contract.
type contract struct {
	ID                 eid    `json:"id"`
	Name               string `json:"name"`
	ContractMaturityID eid    `json:"contractMaturityId"`
}

// contractMaturity is ContractMaturity.
type contractMaturity struct {
	ID              eid       `json:"id"`
	ProductID       eid       `json:"productId"`
	ExpirationMonth int       `json:"expirationMonth"`
	ExpirationDate  time.Time `json:"expirationDate"`
	IsFront         bool      `json:"isFront"`
}

// product is Product.
type product struct {
	ID              eid    `json:"id"`
	Name            string `json:"name"`
	CurrencyID      eid    `json:"currencyId"`
	ProductType     string `json:"productType"`
	Status          string `json:"status"`
	ValuePerPoint   num    `json:"valuePerPoint"`
	PriceFormatType string `json:"priceFormatType"`
	PriceFormat     int    `json:"priceFormat"`
	TickSize        num    `json:"tickSize"`
}

// currency is Currency.
type currency struct {
	ID   eid    `json:"id"`
	Name string `json:"name"`
}

// placeOrder is PlaceOrder.
type placeOrder struct {
	AccountSpec string `json:"accountSpec,omitempty"`
	AccountID   eid    `json:"accountId"`
	ClOrdID     string `json:"clOrdId"`
	Action      string `json:"action"`
	Symbol      string `json:"symbol"`
	OrderQty    num    `json:"orderQty"`
	OrderType   string `json:"orderType"`
	Price       *num   `json:"price,omitempty"`
	StopPrice   *num   `json:"stopPrice,omitempty"`
	TimeInForce string `json:"timeInForce,omitempty"`
	IsAutomated bool   `json:"isAutomated"`
}

// placeOrderResult is PlaceOrderResult.
type placeOrderResult struct {
	ErrorText     string `json:"errorText"` // not in the schema; some answers carry it
	FailureReason string `json:"failureReason"`
	FailureText   string `json:"failureText"`
	OrderID       eid    `json:"orderId"`
}

// modifyOrder is ModifyOrder.
type modifyOrder struct {
	OrderID     eid    `json:"orderId"`
	OrderQty    num    `json:"orderQty"`
	OrderType   string `json:"orderType"`
	Price       *num   `json:"price,omitempty"`
	StopPrice   *num   `json:"stopPrice,omitempty"`
	TimeInForce string `json:"timeInForce,omitempty"`
	IsAutomated bool   `json:"isAutomated"`
}

// cancelOrder is CancelOrder.
type cancelOrder struct {
	OrderID     eid  `json:"orderId"`
	IsAutomated bool `json:"isAutomated"`
}

// commandResult is CommandResult (the answer of cancelorder and modifyorder).
type commandResult struct {
	ErrorText     string `json:"errorText"`
	FailureReason string `json:"failureReason"`
	FailureText   string `json:"failureText"`
	CommandID     eid    `json:"commandId"`
}

// accountRef is the body of the calls that take one account
// (GetCashBalanceSnapshot).
type accountRef struct {
	AccountID eid `json:"accountId"`
}

// syncRequest is SyncRequest, the body of user/syncrequest.
type syncRequest struct {
	Users    []eid `json:"users,omitempty"`
	Accounts []eid `json:"accounts,omitempty"`
}

// syncMessage is SyncMessage: the user's entities at the start of the
// user-data stream.
type syncMessage struct {
	Accounts         []account          `json:"accounts"`
	CashBalances     []cashBalance      `json:"cashBalances"`
	Currencies       []currency         `json:"currencies"`
	Positions        []position         `json:"positions"`
	Orders           []order            `json:"orders"`
	Contracts        []contract         `json:"contracts"`
	Maturities       []contractMaturity `json:"contractMaturities"`
	Products         []product          `json:"products"`
	Commands         []command          `json:"commands"`
	ExecutionReports []executionReport  `json:"executionReports"`
	OrderVersions    []orderVersion     `json:"orderVersions"`
	Fills            []fill             `json:"fills"`
}
