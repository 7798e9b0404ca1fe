package eventlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// pubMsg is one append's message, reused from append to append: its header
// map and the map's value slices are set in place. The jetstream package's
// PublishMsg builds an options value, three option funcs, a header map and
// three value slices, and decodes the ack into a PubAck of every field, for
// every append: about a kilobyte an order of the commit's allocation.
type pubMsg struct {
	m                    nats.Msg
	id, stream, expected []string
}

var pubMsgs = sync.Pool{New: func() any {
	p := &pubMsg{id: make([]string, 1), stream: make([]string, 1), expected: make([]string, 1)}
	p.m.Header = nats.Header{
		jetstream.MsgIDHeader:               p.id,
		jetstream.ExpectedStreamHeader:      p.stream,
		jetstream.ExpectedLastSubjSeqHeader: p.expected,
	}
	return p
}}

// pubAck is the stream's answer to an append: its sequence, whether the
// message id was a duplicate, or the stream's refusal.
type pubAck struct {
	Stream    string              `json:"stream"`
	Seq       uint64              `json:"seq"`
	Duplicate bool                `json:"duplicate"`
	Error     *jetstream.APIError `json:"error"`
}

// appendTimeout bounds the wait for an append's ack when its context has no
// deadline of its own: jetstream's default API timeout (5 s), which PublishMsg
// applies the same way.
var appendTimeout = 5 * time.Second

// request sends one append, guarded by the subject's expected last sequence
// and the stream's name, under msgID, and reads its ack: what jetstream's
// PublishMsg does with those options, the same headers and errors
// (*jetstream.APIError for the stream's refusal, jetstream.ErrNoStreamResponse
// when no stream answered after its retries), without building them anew.
func (l *Log) request(ctx context.Context, subject string, expected uint64, msgID string, data []byte) (seq uint64, duplicate bool, err error) {
	if _, ok := ctx.Deadline(); !ok { // as PublishMsg: an ack never waited for without end
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, appendTimeout)
		defer cancel()
	}
	p := pubMsgs.Get().(*pubMsg)
	p.m.Subject, p.m.Data = l.phys(subject), data
	p.id[0], p.stream[0], p.expected[0] = msgID, l.name, strconv.FormatUint(expected, 10)
	resp, err := l.nc.RequestMsgWithContext(ctx, &p.m)
	// As PublishMsg: no responders is retried, against a blip of the
	// stream's leadership.
	for r := 0; errors.Is(err, nats.ErrNoResponders) && r < jetstream.DefaultPubRetryAttempts; r++ {
		select {
		case <-ctx.Done():
		case <-time.After(jetstream.DefaultPubRetryWait):
		}
		resp, err = l.nc.RequestMsgWithContext(ctx, &p.m)
	}
	p.m.Subject, p.m.Data = "", nil // sent: the connection copied the bytes
	p.id[0], p.stream[0], p.expected[0] = "", "", ""
	pubMsgs.Put(p)
	if errors.Is(err, nats.ErrNoResponders) {
		return 0, false, jetstream.ErrNoStreamResponse
	}
	if err != nil {
		return 0, false, err
	}
	ack, ok := storedAck(resp.Data)
	if !ok {
		if err := json.Unmarshal(resp.Data, &ack); err != nil {
			return 0, false, jetstream.ErrInvalidJSAck
		}
	}
	if ack.Error != nil {
		return 0, false, fmt.Errorf("nats: %w", ack.Error)
	}
	if ack.Stream == "" {
		return 0, false, jetstream.ErrInvalidJSAck
	}
	return ack.Seq, ack.Duplicate, nil
}

// storedAck reads the ack the server writes for a stored message without
// decoding JSON: {"stream":"NAME","seq":N}, or with ,"duplicate": true (or
// without the space) before the brace, N of 1 to 19 digits and NAME of
// printable ASCII without a backslash. ok is false for anything else (a refusal, a domain,
// another spelling), which the caller decodes as JSON. Its Stream is
// streamNamed, not the name: the caller asks only whether the ack named a
// stream, and this one did.
func storedAck(b []byte) (ack pubAck, ok bool) {
	const streamKey, seqKey = `{"stream":"`, `","seq":`
	if len(b) < len(streamKey) || string(b[:len(streamKey)]) != streamKey {
		return pubAck{}, false
	}
	b = b[len(streamKey):]
	name := 0
	for name < len(b) && b[name] != '"' {
		if c := b[name]; c < 0x20 || c > 0x7e || c == '\\' {
			return pubAck{}, false // only printable ASCII, no escape
		}
		name++
	}
	if name == 0 || len(b)-name < len(seqKey) || string(b[name:name+len(seqKey)]) != seqKey {
		return pubAck{}, false
	}
	b = b[name+len(seqKey):]
	digits := 0
	for digits < len(b) && b[digits] >= '0' && b[digits] <= '9' {
		ack.Seq = ack.Seq*10 + uint64(b[digits]-'0')
		digits++
	}
	if digits == 0 || digits > 19 || (digits > 1 && b[0] == '0') {
		return pubAck{}, false
	}
	switch string(b[digits:]) {
	case "}":
	case `,"duplicate": true}`, `,"duplicate":true}`:
		ack.Duplicate = true
	default:
		return pubAck{}, false
	}
	ack.Stream = streamNamed
	return ack, true
}

// streamNamed stands for the stream's name in an ack storedAck read.
const streamNamed = "-"
