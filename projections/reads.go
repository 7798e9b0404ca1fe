package projections

import "context"

// Orders lists an account's orders, newest first, at most limit (0: all), in
// state "open" (working), "closed" or "all".
func Orders(ctx context.Context, s Store, accountID, state string, limit int) ([]Order, error) {
	out := []Order{}
	err := s.List(ctx, CollOrderSeq, Query{Prefix: accountID + "/", Reverse: true}, func(_ string, decode func(any) error) error {
		if limit > 0 && len(out) >= limit {
			return errStop
		}
		var id string
		if err := decode(&id); err != nil {
			return err
		}
		o, err := GetInto[Order](ctx, s, CollOrder, accountID+"/"+id)
		if err != nil {
			return err
		}
		if state == "all" || (state == "open") == o.Working() {
			out = append(out, o)
		}
		return nil
	})
	if err == errStop {
		err = nil
	}
	return out, err
}

type stopErr struct{}

func (stopErr) Error() string { return "stop" }

var errStop error = stopErr{}

// WorkingOrders lists an account's working orders, oldest first.
func WorkingOrders(ctx context.Context, s Store, accountID string) ([]Order, error) {
	ids, err := ListInto[string](ctx, s, CollWorking, Query{Prefix: accountID + "/"})
	if err != nil {
		return nil, err
	}
	out := make([]Order, 0, len(ids))
	for _, id := range ids {
		o, err := GetInto[Order](ctx, s, CollOrder, accountID+"/"+id)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// AccountsOf lists a tenant's accounts in account id order.
func AccountsOf(ctx context.Context, s Store, tenantID string) ([]Account, error) {
	ids, err := ListInto[string](ctx, s, CollTenantAccount, Query{Prefix: tenantID + "/"})
	if err != nil {
		return nil, err
	}
	out := make([]Account, 0, len(ids))
	for _, id := range ids {
		a, err := GetInto[Account](ctx, s, CollAccount, id)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}
