package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/cockroachdb/apd/v3"

	"github.com/svc/engine/cmd/client"
)

// Stream is an open account stream (GET /api/account/stream): its `account`
// frames in the order they arrive on C, which closes when the stream ends.
type Stream struct {
	C   <-chan client.AccountFrame
	err error // why the stream ended; written before C closes
}

// Err says why the stream ended once C is closed: nil when ctx ended it or
// the engine closed it (it drains), else the read or decoding error.
func (s *Stream) Err() error { return s.err }

// OpenStream opens the account stream. The engine sends a frame named
// `account` on connect and on every change, with the revision as the event's
// id; a `lock` event when the risk lock changes, and a comment every 15 s.
// Only frames reach C. A refusal to open the stream is an *Error. The stream
// ends with ctx.
func OpenStream(ctx context.Context, c client.ClientInterface, params *client.StreamAccountParams) (*Stream, error) {
	resp, err := c.StreamAccount(ctx, params)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, refusal(resp, b)
	}
	ch := make(chan client.AccountFrame)
	s := &Stream{C: ch}
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		var event string
		var data []byte
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "": // an event ends at a blank line
				if event == "account" {
					var f client.AccountFrame
					if err := json.Unmarshal(data, &f); err != nil {
						s.err = fmt.Errorf("account frame: %w", err)
						return
					}
					select {
					case ch <- f:
					case <-ctx.Done():
						return
					}
				}
				event, data = "", data[:0]
			case strings.HasPrefix(line, ":"): // a comment: the heartbeat
			default:
				field, value, _ := strings.Cut(line, ":")
				value = strings.TrimPrefix(value, " ")
				switch field {
				case "event":
					event = value
				case "data": // several data lines are one payload, joined by newlines
					if len(data) > 0 {
						data = append(data, '\n')
					}
					data = append(data, value...)
				}
			}
		}
		if ctx.Err() == nil {
			s.err = sc.Err()
		}
	}()
	return s, nil
}

// Fold holds the newest account frame it was given. Add keeps a frame only
// when its revision is higher than the held one's: the revision is the
// account's commit sequence (strictly increasing, it may skip numbers), so an
// older or repeated frame (the first frame after a reconnect, one overtaken on
// the way) never takes the held picture back. A frame is complete: the held
// one is the whole account at its revision, nothing is merged.
type Fold struct {
	Held          client.AccountFrame // valid once Kept > 0
	Kept, Skipped int
}

// Add folds f in and reports whether it is now the held frame.
func (fd *Fold) Add(f client.AccountFrame) bool {
	if fd.Kept > 0 && f.Revision <= fd.Held.Revision {
		fd.Skipped++
		return false
	}
	fd.Held = f
	fd.Kept++
	return true
}

// Until folds s's frames in until the held frame satisfies ok, and fails when
// the stream or ctx ends first.
func (fd *Fold) Until(ctx context.Context, s *Stream, ok func(client.AccountFrame) bool) error {
	for fd.Kept == 0 || !ok(fd.Held) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("account stream at revision %d: %w", fd.Held.Revision, ctx.Err())
		case f, open := <-s.C:
			if !open {
				err := s.Err()
				if err == nil {
					err = io.EOF
				}
				return fmt.Errorf("account stream ended at revision %d: %w", fd.Held.Revision, err)
			}
			fd.Add(f)
		}
	}
	return nil
}

// Net is the frame's position in instrument as a signed quantity: positive
// long, negative short, zero flat.
func Net(f client.AccountFrame, instrument string) (*apd.Decimal, error) {
	for _, p := range f.Positions {
		if p.Instrument != instrument {
			continue
		}
		q, _, err := apd.NewFromString(p.Quantity)
		if err != nil {
			return nil, fmt.Errorf("position %s quantity %q: %w", instrument, p.Quantity, err)
		}
		if p.Side == client.AccountFramePositionsSideShort {
			q.Neg(q)
		}
		return q, nil
	}
	return apd.New(0, 0), nil
}

// afterFill is the net position once o's fills are added to net.
func afterFill(net *apd.Decimal, o client.Order) (*apd.Decimal, error) {
	filled, _, err := apd.NewFromString(o.FilledQuantity)
	if err != nil {
		return nil, fmt.Errorf("order %s filledQuantity %q: %w", o.BrokerOrderId, o.FilledQuantity, err)
	}
	if o.Side == client.OrderSideSell {
		filled.Neg(filled)
	}
	var sum apd.Decimal
	if _, err := apd.BaseContext.WithPrecision(34).Add(&sum, net, filled); err != nil {
		return nil, err
	}
	return &sum, nil
}

// position describes a signed position: "long 0.01", "short 2", "flat".
func position(q *apd.Decimal) string {
	switch q.Sign() {
	case 0:
		return "flat"
	case -1:
		var abs apd.Decimal
		abs.Abs(q)
		return "short " + abs.Text('f')
	}
	return "long " + q.Text('f')
}
