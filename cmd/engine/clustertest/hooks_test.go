package clustertest

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// hooks is a firm's webhook endpoint the engines trust (its certificate in
// SSL_CERT_FILE), and the balance operations that make its deliveries.
type hooks struct {
	srv     *httptest.Server
	certs   string // the PEM file the engines trust
	mu      sync.Mutex
	got     map[string]int  // event id "/" Webhook-Attempt -> times received
	refs    map[string]bool // referenceIds of the balance operations delivered
	acked   map[string]bool // referenceIds of the balance operations answered 200
	account string
}

func newHooks(t *testing.T) *hooks {
	h := &hooks{got: map[string]int{}, refs: map[string]bool{}, acked: map[string]bool{}}
	h.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct {
			ID   string `json:"id"`
			Data struct {
				ReferenceID string `json:"referenceId"`
			} `json:"data"`
		}
		_ = json.NewDecoder(r.Body).Decode(&ev)
		h.mu.Lock()
		h.got[ev.ID+"/"+r.Header.Get("Webhook-Attempt")]++
		h.refs[ev.Data.ReferenceID] = true
		h.mu.Unlock()
	}))
	t.Cleanup(h.srv.Close)
	h.certs = filepath.Join(t.TempDir(), "receiver.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: h.srv.Certificate().Raw})
	if err := os.WriteFile(h.certs, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	return h
}

// env is what the engines need to deliver to the receiver at once.
func (h *hooks) env() map[string]string {
	return map[string]string{"SSL_CERT_FILE": h.certs, "ENGINE_WEBHOOK_ALLOW_PRIVATE": "1", "ENGINE_WEBHOOK_BACKOFF": "1s,1s,1s,1s,1s"}
}

// register makes the firm's endpoint and the account its operations credit.
func (h *hooks) register(t *testing.T, d *deployment) {
	t.Helper()
	key := d.creds.PartnerKey
	code, b, err := call(d.engines[0].URL(), key, "POST", "/api/partner/webhooks",
		map[string]any{"url": h.srv.URL + "/hook", "eventTypes": []string{"balance.recorded"}})
	if err != nil || code/100 != 2 {
		t.Fatalf("register the webhook: %d %s %v", code, b, err)
	}
	code, b, err = call(d.engines[0].URL(), key, "POST", "/api/partner/accounts",
		map[string]any{"accounts": []any{map[string]any{"referenceId": "hooks-1", "email": "hooks@example.com", "startingBalance": "1000"}}})
	var res struct {
		Results []struct {
			Account *struct {
				AccountNumber string `json:"accountNumber"`
			} `json:"account"`
		} `json:"results"`
	}
	if err != nil || code/100 != 2 || json.Unmarshal(b, &res) != nil || len(res.Results) != 1 || res.Results[0].Account == nil {
		t.Fatalf("provision: %d %s %v", code, b, err)
	}
	h.account = res.Results[0].Account.AccountNumber
}

// run credits the account once every pace through the nodes in turn, each
// operation retried with its referenceId until answered 200.
func (h *hooks) run(hist *history, stop <-chan struct{}, pace time.Duration) {
	fast := &http.Client{Timeout: 3 * time.Second}
	hist.running.Add(1)
	go func() {
		defer hist.running.Done()
		node := 0
		for k := 0; ; k++ {
			if !hist.enter(stop) {
				return
			}
			ref := fmt.Sprintf("op-%d", k)
			body := map[string]any{"referenceId": ref, "accountNumber": h.account, "op": "credit", "amount": "1"}
			for {
				code, b, err := callClient(fast, hist.d.engines[node].URL(), hist.d.creds.PartnerKey, "POST", "/api/partner/balance-op", body)
				hist.met(ref, hist.d.engines[node].URL(), code, err, b)
				if err == nil && code == http.StatusOK {
					h.mu.Lock()
					h.acked[ref] = true
					h.mu.Unlock()
					break
				}
				node = (node + 1) % len(hist.d.engines)
				select {
				case <-stop:
				default:
					time.Sleep(50 * time.Millisecond)
					continue
				}
				break
			}
			hist.leave(ref)
			time.Sleep(pace)
		}
	}()
}

// check waits until every operation answered 200 was delivered, and finds no
// attempt of an event received twice.
func (h *hooks) check(t *testing.T) {
	t.Helper()
	// After a fault a delivery may need a claim that times out (10 s), the
	// lease to move and the new leader's replay, then the schedule's wait:
	// one CI run's NATS stream leader kill took 32 s, its outage 11 s, and
	// one delivery was not in by 20 s. A delivery never made fails all the same.
	deadline := time.Now().Add(45 * time.Second)
	for {
		h.mu.Lock()
		var missing []string
		for ref := range h.acked {
			if !h.refs[ref] {
				missing = append(missing, ref)
			}
		}
		var twice []string
		for k, n := range h.got {
			if n > 1 {
				twice = append(twice, fmt.Sprintf("%s (%d times)", k, n))
			}
		}
		acked, got := len(h.acked), len(h.got)
		h.mu.Unlock()
		if len(twice) > 0 {
			t.Errorf("webhook attempts received more than once: %v", twice)
			return
		}
		if len(missing) == 0 {
			t.Logf("webhooks: %d balance operations acknowledged, every one delivered (%d attempts received, none twice)", acked, got)
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("webhooks: %d of %d acknowledged balance operations never delivered: %v", len(missing), acked, missing[:min(len(missing), 10)])
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
