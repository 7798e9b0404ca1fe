package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// AdminSocket is the unix socket in the data directory on which a running
// engine takes engine admin's actions, so an operator runs them without
// stopping it. It is made mode 0600 in the 0700 data directory: only the
// directory's owner (and root) reaches it; nothing else listens for them.
const AdminSocket = "admin.sock"

// adminTimeout bounds one action sent over the admin socket.
const adminTimeout = time.Minute

// maxAdminBody bounds an action's request on the admin socket.
const maxAdminBody = 16 << 10

// errNoAdminSocket: no engine listens on the data directory's admin socket
// (none runs, or one ended without removing it); admin opens the log itself.
var errNoAdminSocket = errors.New("engine admin: no engine listens on the admin socket")

// serveAdmin listens on the admin socket until the func it returns is
// called. An engine that cannot (another engine answers on it, or the path
// is too long for a unix socket) logs why and serves on without it.
func (a *App) serveAdmin() (stop func()) {
	path := filepath.Join(a.Cfg.DataDir, AdminSocket)
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		slog.Warn("admin socket: another engine answers on it; engine admin reaches that one", "path", path)
		return func() {}
	}
	_ = os.Remove(path) // left by an engine that ended without removing it
	ln, err := net.Listen("unix", path)
	if err != nil {
		slog.Warn("admin socket: not served; engine admin needs the engine stopped", "path", path, "err", err)
		return func() {}
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		slog.Warn("admin socket: not served; engine admin needs the engine stopped", "path", path, "err", err)
		return func() {}
	}
	srv := &http.Server{Handler: http.HandlerFunc(a.adminAction), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return func() { _ = srv.Close() } // closing the listener removes the socket
}

// adminAction runs one engine admin action sent over the admin socket: a
// POST of an adminRequest, answered with the action's JSON line or
// {"error": why}. Nothing of the request is logged (it may hold a password).
func (a *App) adminAction(w http.ResponseWriter, r *http.Request) {
	answer := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	if r.Method != http.MethodPost || r.URL.Path != "/admin" {
		answer(http.StatusNotFound, map[string]string{"error": "engine admin: POST /admin only"})
		return
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxAdminBody))
	dec.DisallowUnknownFields()
	var req adminRequest
	if err := dec.Decode(&req); err != nil {
		answer(http.StatusBadRequest, map[string]string{"error": "engine admin: the request is not an action: " + err.Error()})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	res, err := adminDo(ctx, a.Deps, req)
	if err != nil {
		answer(http.StatusUnprocessableEntity, map[string]string{"error": err.Error()})
		return
	}
	answer(http.StatusOK, res)
}

// adminOnline sends req to the engine running on cfg's data directory;
// errNoAdminSocket when none listens there.
func adminOnline(ctx context.Context, cfg Config, req adminRequest) (map[string]any, error) {
	path := filepath.Join(cfg.DataDir, AdminSocket)
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, errNoAdminSocket
		}
		return nil, fmt.Errorf("engine admin: the running engine's admin socket %s: %w", path, err)
	}
	c.Close()
	hc := &http.Client{Timeout: adminTimeout + 5*time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}}}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://engine/admin", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("engine admin: the running engine's admin socket %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	var res map[string]any
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("engine admin: the running engine answered %d %q", resp.StatusCode, b)
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := res["error"].(string)
		return nil, fmt.Errorf("%s (answered by the running engine)", msg)
	}
	return res, nil
}
