package projections

import (
	"context"
	"strings"
)

// Orders lists an account's orders, newest first, at most limit (0: all), in
// state "open" (working), "closed" or "all"; a working stop leg shows its
// derived level (Stops).
func Orders(ctx context.Context, s Store, accountID, state string, limit int) ([]Order, error) {
	out, _, err := OrdersPage(ctx, s, accountID, state, "", limit)
	return out, err
}

// OrdersPage is Orders after the order at key after (a key below the
// account's prefix, as a page's next gave; "" from the newest); next is the
// key of the page's last order when more in the state follow, else "".
func OrdersPage(ctx context.Context, s Store, accountID, state, after string, limit int) ([]Order, string, error) {
	out, next, err := Page(ctx, s, CollOrderSeq, Query{Prefix: accountID + "/", Reverse: true}, after, limit, func(decode func(any) error) (Order, bool, error) {
		var id string
		if err := decode(&id); err != nil {
			return Order{}, false, err
		}
		o, err := GetInto[Order](ctx, s, CollOrder, accountID+"/"+id)
		return o, err == nil && (state == "all" || (state == "open") == o.Working()), err
	})
	if err != nil {
		return out, "", err
	}
	return out, next, NewStops(s).Orders(ctx, accountID, out)
}

// FillsPage lists an account's fills, newest first, at most limit, after
// the fill at key after ("" from the newest); next is the key of the page's
// last fill when more follow, else "".
func FillsPage(ctx context.Context, s Store, accountID, after string, limit int) ([]Fill, string, error) {
	return Page(ctx, s, CollFill, Query{Prefix: accountID + "/", Reverse: true}, after, limit, func(decode func(any) error) (Fill, bool, error) {
		var f Fill
		err := decode(&f)
		return f, err == nil, err
	})
}

// Page reads coll in q's order (q.Prefix, q.Reverse) after the key after
// (below q.Prefix; "" from the start) and keeps what read says to keep, at
// most limit (0: no limit). next is the key, below q.Prefix, of the last one
// kept when another would have been kept, else "": a keyset page and its
// cursor.
func Page[T any](ctx context.Context, s Store, coll string, q Query, after string, limit int, read func(decode func(any) error) (T, bool, error)) (out []T, next string, err error) {
	out = []T{}
	if after != "" {
		q.After = q.Prefix + after
	}
	last := ""
	err = s.List(ctx, coll, q, func(key string, decode func(any) error) error {
		v, keep, err := read(decode)
		if err != nil || !keep {
			return err
		}
		if limit > 0 && len(out) == limit {
			next = last
			return errStop
		}
		out, last = append(out, v), strings.TrimPrefix(key, q.Prefix)
		return nil
	})
	if err == errStop {
		err = nil
	}
	return out, next, err
}

// GetOrder reads an account's order as Orders shows it, or ErrNotFound.
func GetOrder(ctx context.Context, s Store, accountID, orderID string) (Order, error) {
	o, err := GetInto[Order](ctx, s, CollOrder, accountID+"/"+orderID)
	if err != nil {
		return o, err
	}
	return NewStops(s).Order(ctx, accountID, o)
}

type stopErr struct{}

func (stopErr) Error() string { return "stop" }

var errStop error = stopErr{}

// WorkingOrders lists an account's working orders, oldest first, each stop
// leg at its derived level (Stops).
func WorkingOrders(ctx context.Context, s Store, accountID string) ([]Order, error) {
	return NewStops(s).WorkingOrders(ctx, accountID)
}

// WorkingOrders is the package's WorkingOrders, deriving through st: a
// frame reads its brackets and its orders' brackets once.
func (st *Stops) WorkingOrders(ctx context.Context, accountID string) ([]Order, error) {
	ids, err := ListInto[string](ctx, st.s, CollWorking, Query{Prefix: accountID + "/"})
	if err != nil {
		return nil, err
	}
	out := make([]Order, 0, len(ids))
	for _, id := range ids {
		o, err := GetInto[Order](ctx, st.s, CollOrder, accountID+"/"+id)
		if err != nil {
			return nil, err
		}
		if o, err = st.Order(ctx, accountID, o); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// AccountsOf lists a tenant's accounts in account id order.
func AccountsOf(ctx context.Context, s Store, tenantID string) ([]Account, error) {
	out, _, err := AccountsPage(ctx, s, tenantID, "", 0, func(Account) bool { return true })
	return out, err
}

// EmailKey is an address as the key of the accounts issued to it: lower-cased
// (tenant.NormalEmail's form), so an account issued to T@Example.com is the
// account of t@example.com.
func EmailKey(email string) string { return strings.ToLower(email) }

// AccountsOfEmail lists the accounts a firm or a venue issued to the address
// email, in account id order. Who may trade them is the gateway's decision:
// a user reaches them only once they have verified that address.
func AccountsOfEmail(ctx context.Context, s Store, email string) ([]Account, error) {
	out, _, err := Page(ctx, s, CollEmailAccount, Query{Prefix: EmailKey(email) + "/"}, "", 0, func(decode func(any) error) (Account, bool, error) {
		var id string
		if err := decode(&id); err != nil {
			return Account{}, false, err
		}
		a, err := GetInto[Account](ctx, s, CollAccount, id)
		// The prefix of one address may begin another's key: only this address's accounts.
		return a, err == nil && EmailKey(a.Email) == EmailKey(email), err
	})
	return out, err
}

// AccountsPage lists a tenant's accounts that keep takes, in account id
// order, at most limit (0: all), after the account id after ("" from the
// first); next is the page's last account id when more follow, else "".
func AccountsPage(ctx context.Context, s Store, tenantID, after string, limit int, keep func(Account) bool) ([]Account, string, error) {
	return Page(ctx, s, CollTenantAccount, Query{Prefix: tenantID + "/"}, after, limit, func(decode func(any) error) (Account, bool, error) {
		var id string
		if err := decode(&id); err != nil {
			return Account{}, false, err
		}
		a, err := GetInto[Account](ctx, s, CollAccount, id)
		return a, err == nil && keep(a), err
	})
}
