package clusterkit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/svc/engine/events"
)

// Call sends one request with the bearer key through c: body is sent as it
// is when []byte (bytes the JSON encoder would not make included), else as
// its JSON. It answers the status and the body.
func Call(c *http.Client, base, key, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// CheckLedger reads an account's fills (up to 1,000) and snapshot through an
// engine and reports where they disagree: the net position the fills add up
// to against the snapshot's, and the balance (start plus the fills'
// realized PnL) and realized PnL. It answers the snapshot's revision and
// how many fills it read.
func CheckLedger(c *http.Client, base, key, account string, start events.Decimal) (revision, fills int, err error) {
	var page struct {
		Fills []struct {
			Side        string         `json:"side"`
			Quantity    events.Decimal `json:"quantity"`
			RealizedPnl events.Decimal `json:"realizedPnl"`
		} `json:"fills"`
	}
	if err := getJSON(c, base, key, "/api/account/fills?limit=1000&account="+account, &page); err != nil {
		return 0, 0, err
	}
	pos, realized := events.Int(0), events.Int(0)
	for _, f := range page.Fills {
		if f.Side == "buy" {
			pos = pos.Add(f.Quantity)
		} else {
			pos = pos.Sub(f.Quantity)
		}
		realized = realized.Add(f.RealizedPnl)
	}
	var snap struct {
		Revision int `json:"revision"`
		Summary  struct {
			Balance     events.Decimal `json:"balance"`
			RealizedPnl events.Decimal `json:"realizedPnl"`
		} `json:"summary"`
		Positions []struct {
			Side     string         `json:"side"`
			Quantity events.Decimal `json:"quantity"`
		} `json:"positions"`
	}
	if err := getJSON(c, base, key, "/api/account/snapshot?account="+account, &snap); err != nil {
		return 0, len(page.Fills), err
	}
	got := events.Int(0)
	for _, p := range snap.Positions {
		if p.Side == "short" {
			got = got.Sub(p.Quantity)
		} else {
			got = got.Add(p.Quantity)
		}
	}
	if got.Cmp(pos) != 0 {
		return snap.Revision, len(page.Fills), fmt.Errorf("%s: position %s, its %d fills say %s", account, got, len(page.Fills), pos)
	}
	if want := start.Add(realized); snap.Summary.Balance.Cmp(want) != 0 || snap.Summary.RealizedPnl.Cmp(realized) != 0 {
		return snap.Revision, len(page.Fills), fmt.Errorf("%s: balance %s realized %s, fills say %s", account, snap.Summary.Balance, snap.Summary.RealizedPnl, realized)
	}
	return snap.Revision, len(page.Fills), nil
}

// getJSON reads path into v; a status other than 200 is an error.
func getJSON(c *http.Client, base, key, path string, v any) error {
	code, b, err := Call(c, base, key, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", path, code, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("GET %s: %w: %s", path, err, b)
	}
	return nil
}
