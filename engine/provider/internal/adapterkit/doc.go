// Package adapterkit is what the provider adapters (engine/provider/binance,
// engine/provider/tradovate) share beside their protocols: the kinds of
// call and what a lost answer of each means (Op, SendError, CleanCause),
// the streams' goroutines and their reconnect with backoff (Go, Redial,
// Sleep, Send), and the HTTP plumbing of their budgets and sockets
// (Window and Take, Hold, RetryAfter, HeaderInt, Later, TraceWrite, Dial).
package adapterkit
