// Package provider is the boundary between the engine and the places where
// accounts live elsewhere: an exchange or broker that holds the trader's
// balances, positions and orders. Every provider, built-in or a registered
// provider version, implements Provider and Session; what one can do is its
// Capabilities, the manifest's flags.
//
// The package is pure: domain types, typed errors and the derivation of the
// provider's client order id. It does no I/O; adapters (provider/binance) do.
// Prices and quantities are events.Decimal (apd), never float.
//
// What a provider says is bounded and typed here: an adapter parses every
// answer once into these types, and its errors are the typed errors of
// errors.go. No provider text reaches an error message or a user.
package provider

import (
	"context"

	"github.com/svc/engine/commands/venue"
)

// Capabilities are the manifest's capability flags and lists
// (accounts, execution, marketData, generationFencing, completeOrderBook,
// executionHistory, executionCorrections, reduceOnly, nativeReplace,
// nativeOco, orderTypes, timeInForce, positionModels). A built-in provider
// declares them as a registered provider version's manifest would.
type Capabilities = venue.Capabilities

// Provider is one kind of outside account: its public data and the way in.
// Its methods are safe for concurrent use.
type Provider interface {
	// Name is the provider's stable name, such as "binance-futures".
	Name() string
	// Capabilities says what the provider supports; the engine refuses what
	// it does not before anything is sent.
	Capabilities() Capabilities
	// Connect checks the credentials against the provider and opens a
	// session: the key is valid, the account readable, trading allowed. A
	// key the provider says can withdraw is refused (*KeyRefused). It
	// returns *Unauthorized for a key or secret the provider does not take.
	Connect(ctx context.Context, c Credentials) (Session, error)
	// Instruments lists the tradable instruments with their filters. Public.
	Instruments(ctx context.Context) ([]Instrument, error)
	// Quotes streams public prices (best bid/ask and mark) of the symbols
	// until ctx ends, then closes the channel. It reconnects by itself; a
	// Quote with Stale set says the feed was cut and prices may have been
	// missed.
	Quotes(ctx context.Context, symbols []string) (<-chan Quote, error)
}

// Session is one linked account at the provider, opened by Connect. Its
// methods are safe for concurrent use; the engine gives each account's session
// to exactly one owner, which alone sends.
//
// Writes (Place, Cancel, Replace) never retry by themselves. When the answer
// is lost after the request may have reached the provider they return
// *Unknown; the caller settles with Lookup, never by sending again.
type Session interface {
	// Settings reads the account's modes (hedge, multi-assets, portfolio
	// margin) from the provider; they are never assumed.
	Settings(ctx context.Context) (Settings, error)
	// Snapshot reads balances, positions and every working order. It is
	// complete or an error: a read that fails partway returns the error and
	// no snapshot.
	Snapshot(ctx context.Context) (Snapshot, error)
	// Place sends a new order under o.ClientOrderID (see ClientOrderID) and
	// returns its state as the provider accepted it.
	Place(ctx context.Context, o Order) (OrderState, error)
	// Cancel asks the provider to cancel the order and returns after the
	// provider accepted the cancel (the state it answers, normally
	// canceled). An order the provider does not know is *NotFound.
	Cancel(ctx context.Context, instrument, clientOrderID string) (OrderState, error)
	// Replace changes a working order's price and quantity in place where
	// the provider can (Capabilities.NativeReplace).
	Replace(ctx context.Context, r Replace) (OrderState, error)
	// Lookup reads the order by its client order id. It never sends an
	// order: it is how a lost answer is settled. *NotFound means the
	// provider never took it.
	Lookup(ctx context.Context, instrument, clientOrderID string) (OrderState, error)
	// Executions lists the account's fills of the instrument after the
	// cursor, oldest first, at most limit (0: the provider's default), and
	// the cursor to continue from. The zero Cursor starts at the oldest the
	// provider keeps.
	Executions(ctx context.Context, instrument string, since Cursor, limit int) ([]Execution, Cursor, error)
	// Events streams the account's changes until ctx ends or Close, then
	// closes the channel. After the stream is cut it reconnects by itself and
	// delivers a Gap once the new stream is live: anything may have been
	// missed before it, so the caller reconciles (Snapshot) on each Gap.
	Events(ctx context.Context) (<-chan Event, error)
	// Close ends the session and its streams.
	Close() error
}
