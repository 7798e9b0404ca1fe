package api

import (
	"net/url"
	"strings"
	"testing"
)

// queryParam answers what url.Values would for every selector a client
// may send, however it spells the query.
func TestQueryParamAnswersAsURLQuery(t *testing.T) {
	for _, raw := range []string{
		"", "broker=paper&account=1", "account=", "account", "&&account=7&", "account=1&account=2",
		"account=a+b%20c", "acc%6Funt=5", "account=%zz&account=ok", "acc%zzount=1&account=2", "account=1;broker=x",
		"broker=x;y&broker=z", "Account=1", "account==1", "broker=%E2%82%AC", strings.Repeat("x=1&", 70) + "account=9",
	} {
		u := &url.URL{Path: "/api/trading/order", RawQuery: raw}
		q := u.Query()
		for _, key := range []string{"broker", "account"} {
			v, ok := queryParam(u, key)
			if v != q.Get(key) || ok != q.Has(key) {
				t.Errorf("%q %s: %q %v, url.Query %q %v", raw, key, v, ok, q.Get(key), q.Has(key))
			}
		}
	}
}
