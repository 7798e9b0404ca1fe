package provider

import "context"

// RollSession is a ContractSession that names the month of a product to
// trade now: the provider's own roll (its best upcoming maturity), which
// moves on to the next month before the front month expires (for a
// treasury future, before its first intent day).
type RollSession interface {
	// Front is the provider's name of the month of product (a root such as
	// ES) to trade now; *NotFound when the provider lists none.
	Front(ctx context.Context, product string) (string, error)
}
