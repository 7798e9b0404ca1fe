package jepsen

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// The proxy takes the fencing headers off an HPUB and restates its sizes,
// and passes every other operation (a PUB's payload that reads like a
// protocol line included) as it came.
func TestProxyStripsFencing(t *testing.T) {
	hdr := "NATS/1.0\r\nNats-Msg-Id: c1\r\nNats-Expected-Last-Subject-Sequence: 41\r\nnats-expected-stream: EVT\r\n\r\n"
	payload := "{\"x\":1}"
	tricky := "HPUB b _ 1 1\r\nPING" // a PUB's payload that reads like operations
	in := "CONNECT {\"headers\":true}\r\n" +
		"PUB a " + itoa(len(tricky)) + "\r\n" + tricky + "\r\n" +
		"HPUB evt.account.x _INBOX.1 " + itoa(len(hdr)) + " " + itoa(len(hdr)+len(payload)) + "\r\n" + hdr + payload + "\r\n" +
		"PING\r\n"
	var out bytes.Buffer
	var n atomic.Int64
	if err := copyClient(&out, bufio.NewReader(strings.NewReader(in)), &n); err == nil || !strings.Contains(err.Error(), "EOF") {
		t.Fatalf("copyClient: %v", err)
	}
	wantHdr := "NATS/1.0\r\nNats-Msg-Id: c1\r\nnats-expected-stream: EVT\r\n\r\n"
	want := "CONNECT {\"headers\":true}\r\n" +
		"PUB a " + itoa(len(tricky)) + "\r\n" + tricky + "\r\n" +
		"HPUB evt.account.x _INBOX.1 " + itoa(len(wantHdr)) + " " + itoa(len(wantHdr)+len(payload)) + "\r\n" + wantHdr + payload + "\r\n" +
		"PING\r\n"
	if out.String() != want {
		t.Errorf("got\n%q\nwant\n%q", out.String(), want)
	}
	if n.Load() != 1 {
		t.Errorf("removed %d headers, want 1", n.Load())
	}
}

// The servers' INFO loses the cluster's other URLs, so the client never
// reconnects around the proxy.
func TestProxyHidesServers(t *testing.T) {
	in := "INFO {\"server_id\":\"S\",\"connect_urls\":[\"169.254.1.11:14222\"],\"headers\":true}\r\nMSG a 1 9\r\nINFO {}\r\n\r\n+OK\r\n"
	var out bytes.Buffer
	_ = copyServer(&out, bufio.NewReader(strings.NewReader(in)))
	want := "INFO {\"headers\":true,\"server_id\":\"S\"}\r\nMSG a 1 9\r\nINFO {}\r\n\r\n+OK\r\n"
	if out.String() != want {
		t.Errorf("got\n%q\nwant\n%q", out.String(), want)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
