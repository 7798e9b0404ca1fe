package jepsen

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// MissDetail is what a fault window whose serving floor was missed shows:
// the window in wall time, the attempts invoked from grace into it until
// its heal by node, kind, outcome and code, every engine's log lines from
// 2 s before the fault until 1 s after its heal (at most 80 each; of the
// requests only the 5xx and 202 answers) and the end of PostgreSQL's log
// (its lock waits).
func MissDetail(c *Cluster, h *History, w Window, grace time.Duration) string {
	var b strings.Builder
	from, until := h.Start().Add(w.Start), h.Start().Add(w.End)
	fmt.Fprintf(&b, "window %s .. %s (wall, UTC)\n", from.UTC().Format("15:04:05.000"), until.UTC().Format("15:04:05.000"))
	counts := map[string]int{}
	for _, op := range h.Ops() {
		if op.Call < w.Start+grace || op.Call > w.End {
			continue
		}
		counts[fmt.Sprintf("%s %s %s %d %s", engineName(op.Node), op.Kind, op.Outcome, op.Status, op.Code)]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(&b, "attempts invoked from %v into it (node kind outcome status code: n):\n", grace)
	for _, k := range keys {
		fmt.Fprintf(&b, "  %s: %d\n", k, counts[k])
	}
	for _, p := range c.Engines {
		fmt.Fprintf(&b, "%s's log (%s):\n", p.Name, p.logPath)
		b.WriteString(logBetween(p.logPath, from.Add(-2*time.Second), until.Add(time.Second), 80))
	}
	if c.PG != nil {
		fmt.Fprintf(&b, "%s's log, the last 40 lines (%s):\n", c.PG.Name, c.PG.logPath)
		for _, l := range strings.Split(c.PG.Tail(40), "\n") {
			b.WriteString("  " + l + "\n")
		}
	}
	return b.String()
}

// logBetween is the JSON log lines of path whose time is in [from, until],
// at most n (the last n when more).
func logBetween(path string, from, until time.Time, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "  " + err.Error() + "\n"
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var l struct {
			Time   time.Time `json:"time"`
			Msg    string    `json:"msg"`
			Status int       `json:"status"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Time.Before(from) || l.Time.After(until) {
			continue
		}
		if l.Msg == "request" && l.Status < 500 && l.Status != 202 {
			continue // answered: the 503s, the 202s and the rest tell
		}
		lines = append(lines, "  "+sc.Text())
	}
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("  ... %d lines before", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n") + "\n"
}
