package jepsen

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// The deliberately broken deployment. The engine is fenced twice: an
// account's commands are decided by the node holding its partition's lease
// (a compare-and-set on a JetStream key-value bucket, engine/cluster), and
// every commit is appended on the expectation of the account's last
// sequence (Nats-Expected-Last-Subject-Sequence, engine/eventlog), which the
// server enforces, so a stale owner cannot write. Both are headers on a
// publish. The unfenced proxy sits between an engine and the nats-servers,
// in the engine's namespace, and takes every expectation header off every
// publish: the lease bucket's compare-and-set and the log's guard are gone,
// and nothing else changes. No engine code is switched off, and no setting
// of the shipped binary can do it. The checkers must catch it.

// proxyEnv tells the test binary to run as the proxy (TestMain):
// listen=target pairs, comma-separated.
const proxyEnv = "JEPSEN_NATS_PROXY"

// fencingHeaders are the headers the proxy removes.
var fencingHeaders = []string{
	"Nats-Expected-Last-Subject-Sequence",
	"Nats-Expected-Last-Subject-Sequence-Subject",
	"Nats-Expected-Last-Sequence",
	"Nats-Expected-Last-Msg-Id",
}

// ProxyFromEnv runs the proxy when the environment asks for it (in the
// test binary's TestMain): ok is false when it does not. It returns only on
// a failure to listen.
func ProxyFromEnv(getenv func(string) string) (ok bool, err error) {
	spec := getenv(proxyEnv)
	if spec == "" {
		return false, nil
	}
	return true, RunProxy(spec)
}

// RunProxy listens on each listen address of spec (listen=target,...) and
// forwards every connection to its target, taking the fencing headers off
// every HPUB and the other servers' URLs out of every INFO (so the client
// never reconnects around the proxy). It logs what it removed every second.
func RunProxy(spec string) error {
	var stripped atomic.Int64
	errs := make(chan error, 1)
	for _, pair := range strings.Split(spec, ",") {
		listen, target, ok := strings.Cut(pair, "=")
		if !ok {
			return fmt.Errorf("jepsen proxy: %q is not listen=target", pair)
		}
		l, err := net.Listen("tcp", listen)
		if err != nil {
			return err
		}
		go func() {
			for {
				conn, err := l.Accept()
				if err != nil {
					errs <- err
					return
				}
				go proxyConn(conn, target, &stripped)
			}
		}()
	}
	logged := int64(0)
	for {
		select {
		case err := <-errs:
			return err
		case <-time.After(time.Second):
			if n := stripped.Load(); n != logged {
				log.Printf("jepsen proxy: %d fencing headers removed so far", n)
				logged = n
			}
		}
	}
}

func proxyConn(client net.Conn, target string, stripped *atomic.Int64) {
	defer client.Close()
	server, err := net.DialTimeout("tcp", target, 2*time.Second)
	if err != nil {
		return
	}
	defer server.Close()
	done := make(chan struct{}, 2)
	go func() {
		_ = copyClient(server, bufio.NewReaderSize(client, 64<<10), stripped)
		done <- struct{}{}
	}()
	go func() {
		_ = copyServer(client, bufio.NewReaderSize(server, 64<<10))
		done <- struct{}{}
	}()
	<-done
}

// copyClient copies the client's protocol to w, each HPUB without the
// fencing headers.
func copyClient(w io.Writer, r *bufio.Reader, stripped *atomic.Int64) error {
	bw := bufio.NewWriter(w)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return err
		}
		f := strings.Fields(string(line))
		op := ""
		if len(f) > 0 {
			op = strings.ToUpper(f[0])
		}
		switch op {
		case "PUB":
			if err := copyPayload(bw, r, line, f, len(f)-1); err != nil {
				return err
			}
		case "HPUB":
			if len(f) < 4 {
				return fmt.Errorf("jepsen proxy: %q", line)
			}
			hsize, err1 := strconv.Atoi(f[len(f)-2])
			tsize, err2 := strconv.Atoi(f[len(f)-1])
			if err := errors.Join(err1, err2); err != nil || hsize > tsize {
				return fmt.Errorf("jepsen proxy: %q", line)
			}
			body := make([]byte, tsize+2)
			if _, err := io.ReadFull(r, body); err != nil {
				return err
			}
			hdr, n := stripHeaders(body[:hsize])
			stripped.Add(int64(n))
			payload := body[hsize:]
			head := append(append([]string{}, f[:len(f)-2]...), strconv.Itoa(len(hdr)), strconv.Itoa(len(hdr)+len(payload)-2))
			bw.WriteString(strings.Join(head, " ") + "\r\n")
			bw.Write(hdr)
			bw.Write(payload)
		default:
			bw.Write(line)
		}
		if r.Buffered() == 0 {
			if err := bw.Flush(); err != nil {
				return err
			}
		}
	}
}

// copyServer copies the server's protocol to w, each INFO without the URLs
// of the cluster's other servers.
func copyServer(w io.Writer, r *bufio.Reader) error {
	bw := bufio.NewWriter(w)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return err
		}
		f := strings.Fields(string(line))
		op := ""
		if len(f) > 0 {
			op = strings.ToUpper(f[0])
		}
		switch op {
		case "MSG":
			if err := copyPayload(bw, r, line, f, len(f)-1); err != nil {
				return err
			}
		case "HMSG":
			if err := copyPayload(bw, r, line, f, len(f)-1); err != nil {
				return err
			}
		case "INFO":
			var info map[string]any
			raw := bytes.TrimSpace(line[len("INFO"):])
			if json.Unmarshal(raw, &info) == nil {
				delete(info, "connect_urls")
				delete(info, "ws_connect_urls")
				if b, err := json.Marshal(info); err == nil {
					line = append(append([]byte("INFO "), b...), '\r', '\n')
				}
			}
			bw.Write(line)
		default:
			bw.Write(line)
		}
		if r.Buffered() == 0 {
			if err := bw.Flush(); err != nil {
				return err
			}
		}
	}
}

// copyPayload writes line and the payload whose size is field f[at].
func copyPayload(w *bufio.Writer, r *bufio.Reader, line []byte, f []string, at int) error {
	if at < 1 {
		return fmt.Errorf("jepsen proxy: %q", line)
	}
	size, err := strconv.Atoi(f[at])
	if err != nil {
		return fmt.Errorf("jepsen proxy: %q", line)
	}
	w.Write(line)
	_, err = io.CopyN(w, r, int64(size+2))
	return err
}

// stripHeaders is a NATS header block without the fencing headers, and how
// many it removed.
func stripHeaders(h []byte) ([]byte, int) {
	lines := bytes.SplitAfter(h, []byte("\r\n"))
	var out []byte
	n := 0
	for _, l := range lines {
		name, _, ok := bytes.Cut(l, []byte(":"))
		if ok && fencing(string(bytes.TrimSpace(name))) {
			n++
			continue
		}
		out = append(out, l...)
	}
	return out, n
}

func fencing(name string) bool {
	for _, h := range fencingHeaders {
		if strings.EqualFold(name, h) {
			return true
		}
	}
	return false
}
