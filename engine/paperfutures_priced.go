package engine

import (
	"context"
	"sync"
	"time"
)

// pricedWait bounds how long PaperFuturesPriced waits for the owner's feed:
// a little over the feed's wait for a new stream's first quote.
const pricedWait = 6 * time.Second

// PaperFuturesPriced reports which of the futures symbols the paper book
// can price an order of the owner's paper accounts on: every one where a
// futures source of the engine's serves (FuturesServed), else those whose
// product the owner's own futures login's market data covers (its feed
// answers a quote: paperfutures.go), each asked at once. An order on any
// other answers 503 feed_requires_connection. owner is the accounts'
// tenant, as FuturesLogin takes it; "" prices none but the engine's own.
func (e *Engine) PaperFuturesPriced(ctx context.Context, owner string, symbols []string) map[string]bool {
	out := make(map[string]bool, len(symbols))
	if e.FuturesServed() {
		for _, s := range symbols {
			out[s] = true
		}
		return out
	}
	src := e.pf.src
	if src == nil || owner == "" || len(symbols) == 0 {
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, pricedWait)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range symbols {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := src.Quote(ctx, owner, s)
			mu.Lock()
			out[s] = err == nil
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}
