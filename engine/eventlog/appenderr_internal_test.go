package eventlog

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// An append's failure tells the caller what it may say: refused for its
// expected sequence (decide again), never sent (nothing recorded), refused
// by the stream, or unknown whenever the commit may have been stored.
func TestAppendErrorSaysWhatTheCallerMayClaim(t *testing.T) {
	api := func(code jetstream.ErrorCode) error {
		return fmt.Errorf("nats: %w", &jetstream.APIError{Code: 400, ErrorCode: code, Description: "x"})
	}
	for _, c := range []struct {
		name string
		err  error
		want error // nil: the stream's refusal as it is
	}{
		{"wrong last sequence", api(10071), ErrConcurrency},
		{"wrong last sequence (batch)", api(10164), ErrConcurrency},
		{"duplicate message id in process", api(10158), ErrOutcomeUnknown},
		{"expected stream mismatch", api(10060), nil},
		{"reconnect buffer", nats.ErrReconnectBufExceeded, ErrLogUnavailable},
		{"reconnecting", nats.ErrConnectionReconnecting, ErrLogUnavailable},
		{"timeout", nats.ErrTimeout, ErrOutcomeUnknown},
		{"deadline", context.DeadlineExceeded, ErrOutcomeUnknown},
		{"connection lost", context.Canceled, ErrOutcomeUnknown},
		{"no stream answered", jetstream.ErrNoStreamResponse, ErrOutcomeUnknown},
		{"disconnected", nats.ErrDisconnected, ErrOutcomeUnknown},
	} {
		got := appendError("account.a", 7, c.err)
		for _, kind := range []error{ErrConcurrency, ErrOutcomeUnknown, ErrLogUnavailable} {
			if errors.Is(got, kind) != (kind == c.want) {
				t.Errorf("%s: %v; want %v", c.name, got, c.want)
			}
		}
		var apiErr *jetstream.APIError
		if c.want == nil && !errors.As(got, &apiErr) {
			t.Errorf("%s: %v does not carry the stream's refusal", c.name, got)
		}
	}
}
