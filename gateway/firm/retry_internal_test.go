package firm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/gateway/httpx"
)

// TestEvery503OfTheBalanceRoutesCarriesRetryAfter: outcome_unknown too, unlike
// the trading routes.
func TestEvery503OfTheBalanceRoutesCarriesRetryAfter(t *testing.T) {
	cases := []error{
		fmt.Errorf("append: %w", engine.ErrOutcomeUnknown),
		commands.Refuse(commands.CodeOutcomeUnknown, "x", nil),
		commands.Refuse(commands.CodeEngineOverloaded, "x", nil),
		&httpx.Error{Status: http.StatusServiceUnavailable, Code: "x", Msg: "x"},
		context.DeadlineExceeded,
	}
	for _, in := range cases {
		var he *httpx.Error
		if !errors.As(retryable(in), &he) || he.Status != http.StatusServiceUnavailable || he.RetryAfter != 1 {
			t.Fatalf("%v: %+v", in, he)
		}
	}
	var he *httpx.Error
	if errors.As(retryable(fmt.Errorf("append: %w", engine.ErrOutcomeUnknown)), &he); he.Code != "outcome_unknown" {
		t.Fatalf("code %s", he.Code)
	}
	if retryable(nil) != nil {
		t.Fatal("nil became an error")
	}
}
