// Package order is the order vocabulary: the order types, sides and times in
// force the engine knows, and what each type needs. It is the one list: the
// commands' validation, the paper book's fill rules (engine/fill), the
// frame's capabilities and the provider manifest's allowed values read it,
// and a test walks a new value through the places that must learn it
// (engine/fill/vocabulary_test.go: the OpenAPI enums, the fill rule).
//
// Commands and events carry these values as strings, as the wire and the
// log spell them; the parsers here turn a string into its typed value once.
package order

import (
	"slices"
	"strings"
)

// Type is an order type.
type Type string

// The order types.
const (
	Market    Type = "market"
	Limit     Type = "limit"
	Stop      Type = "stop"
	StopLimit Type = "stop_limit"
)

// Side is the side of an order.
type Side string

// The sides.
const (
	Buy  Side = "buy"
	Sell Side = "sell"
)

// TIF is an order's time in force.
type TIF string

// The times in force.
const (
	Day TIF = "day" // until the end of the trading day it was placed in (engine/account DayStart)
	GTC TIF = "gtc" // until canceled
	IOC TIF = "ioc" // fills what it can at once, the rest is canceled
	FOK TIF = "fok" // as IOC in the paper book (a market fill is always whole)
)

// DefaultTIF is the time in force of an order that names none.
const DefaultTIF = Day

// Spec is what an order type needs and allows.
type Spec struct {
	Type Type
	// LimitPrice: the order needs a limit price, and one without it refuses
	// one. A type that needs one rests at it (once triggered, with a stop).
	LimitPrice bool
	// StopPrice: the order needs a stop price, and one without it refuses
	// one. A type that needs one waits for its stop to trigger.
	StopPrice bool
	TIFs      []TIF // the times in force it allows
	// ReduceOnly: the order may be reduce-only.
	ReduceOnly bool
	// Entry: the order may be the entry of an exit plan (a bracket).
	Entry bool
}

// Types is every order type and what it needs, in the order the API lists them.
func Types() []Spec { return slices.Clone(types) }

// types is the table Types copies; Spec and the parsers read it in place, so
// a decision allocates nothing to consult it. A Spec's TIFs are shared:
// read them, never change them.
var types = []Spec{
	{Type: Market, TIFs: TIFs(), ReduceOnly: true, Entry: true},
	{Type: Limit, LimitPrice: true, TIFs: TIFs(), ReduceOnly: true, Entry: true},
	{Type: Stop, StopPrice: true, TIFs: TIFs(), ReduceOnly: true},
	{Type: StopLimit, LimitPrice: true, StopPrice: true, TIFs: TIFs(), ReduceOnly: true},
}

// Sides is both sides.
func Sides() []Side { return slices.Clone(sides) }

var sides = []Side{Buy, Sell}

// TIFs is every time in force, in the order the API lists them.
func TIFs() []TIF { return slices.Clone(tifs) }

var tifs = []TIF{Day, GTC, IOC, FOK}

// ParseType reads an order type; false when s is none.
func ParseType(s string) (Type, bool) {
	for _, sp := range types {
		if string(sp.Type) == s {
			return sp.Type, true
		}
	}
	return "", false
}

// ParseSide reads a side; false when s is none.
func ParseSide(s string) (Side, bool) { return parse(s, sides) }

// ParseTIF reads a time in force; false when s is none.
func ParseTIF(s string) (TIF, bool) { return parse(s, tifs) }

func parse[T ~string](s string, set []T) (T, bool) {
	for _, v := range set {
		if string(v) == s {
			return v, true
		}
	}
	return "", false
}

// Spec is what t needs; the zero Spec (needing nothing, allowing nothing)
// for a type this build does not know.
func (t Type) Spec() Spec {
	for _, sp := range types {
		if sp.Type == t {
			return sp
		}
	}
	return Spec{}
}

// Allows reports whether the type allows time in force f.
func (sp Spec) Allows(f TIF) bool {
	for _, v := range sp.TIFs {
		if v == f {
			return true
		}
	}
	return false
}

// Rests reports whether an order of the type can rest on the book (a market
// order fills at once or not at all).
func (sp Spec) Rests() bool { return sp.LimitPrice || sp.StopPrice }

// Opposite is the other side.
func (s Side) Opposite() Side {
	if s == Buy {
		return Sell
	}
	return Buy
}

// Immediate reports whether f cancels at once what does not fill at once
// (ioc and fok).
func (f TIF) Immediate() bool { return f == IOC || f == FOK }

// Touch is the side of a quote an order of side s trades at: the ask for a
// buy, the bid for a sell.
func Touch[P any](s Side, bid, ask P) P {
	if s == Sell {
		return bid
	}
	return ask
}

// Names is vs as strings, in their order (capabilities, manifests, messages).
func Names[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// TypeNames is every order type's name, in the order the API lists them.
func TypeNames() []string {
	var out []string
	for _, sp := range Types() {
		out = append(out, string(sp.Type))
	}
	return out
}

// OneOf spells a set of values for a message: "a, b or c".
func OneOf(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
