package eventlog

import (
	"encoding/json"
	"testing"
)

// ackSamples are acks as nats-server writes them (stream.go: the stored
// message's, a duplicate's, a domain's, a batch's, a refusal) and bytes
// that only look like them.
var ackSamples = []string{
	`{"stream":"ENGINE","seq":1}`,
	`{"stream":"ENGINE","seq":18446744073709551}`,
	`{"stream":"ENGINE","seq":42,"duplicate": true}`,
	`{"stream":"ENGINE","seq":42,"duplicate":true}`,
	`{"stream":"ENGINE","domain":"hub","seq":7}`,
	`{"stream":"ENGINE","seq":9,"duplicate": true,"batch":"b1","count":3}`,
	`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 4"},"stream":"ENGINE","seq":0}`,
	`{"stream":"ENGINE","seq":99999999999999999999}`,
	`{"stream":"ENGINE","seq":}`,
	`{"stream":"ENGINE","seq":012}`,
	`{"stream":"","seq":5}`,
	`{"stream":"EN\"GINE","seq":5}`,
	`{"stream":"ENGINE","seq":5} `,
	`{"stream":"ENGINE","seq":5`,
	`{"stream":"ENGINE","seq":-5}`,
	`{"stream":"ENGINE","seq":5,"duplicate": false}`,
	`{"stream":"ENGINE"}`,
	``,
}

// storedAck reads what it takes exactly as JSON decoding reads it, and
// takes the server's every-day acks.
func TestStoredAckReadsAsJSONDoes(t *testing.T) {
	taken := 0
	for _, s := range ackSamples {
		if checkStoredAck(t, []byte(s)) {
			taken++
		}
	}
	if taken != 4 {
		t.Fatalf("storedAck took %d of the samples; want the 4 plain and duplicate acks", taken)
	}
}

func FuzzStoredAck(f *testing.F) {
	for _, s := range ackSamples {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkStoredAck(t, b) })
}

// checkStoredAck fails t when storedAck takes b but reads it otherwise
// than JSON decoding does; it reports whether storedAck took it.
func checkStoredAck(t *testing.T, b []byte) bool {
	t.Helper()
	got, ok := storedAck(b)
	if !ok {
		return false
	}
	var want pubAck
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatalf("%q: storedAck took bytes that are not JSON (%v)", b, err)
	}
	if want.Error != nil || want.Stream == "" || got.Seq != want.Seq || got.Duplicate != want.Duplicate {
		t.Fatalf("%q: storedAck read %+v; JSON reads %+v", b, got, want)
	}
	return true
}
