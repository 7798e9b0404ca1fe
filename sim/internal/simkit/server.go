package simkit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Server serves a simulator's handler on a listener of its own (Start) or learns the address of the
// server that serves it (SetBaseURL), counts the simulator's background goroutines (Go), and stops
// all of it (Stop, then Shutdown). The zero value is ready; Name ("binance sim") starts its errors
// and log lines. Safe for concurrent use.
type Server struct {
	Name   string
	Logger *slog.Logger // discards when nil

	mu      sync.Mutex
	srv     *http.Server
	base    string
	once    sync.Once // makes stop
	stopped sync.Once // closes stop
	stop    chan struct{}
	wg      sync.WaitGroup
}

// Start serves h on addr ("127.0.0.1:0" for any free port) until Shutdown.
func (s *Server) Start(addr string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: listen %s: %w", s.Name, addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	s.mu.Lock()
	s.srv = srv
	s.base = "http://" + ln.Addr().String()
	s.mu.Unlock()
	s.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger().Error(s.Name+" serve", "err", err)
		}
	})
	return nil
}

// SetBaseURL tells a simulator served by someone else (httptest.NewServer) its own address.
func (s *Server) SetBaseURL(u string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.base = strings.TrimSuffix(u, "/")
}

// BaseURL is the simulator's address, "http://127.0.0.1:port", or "" before Start or SetBaseURL.
func (s *Server) BaseURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.base
}

// Go runs f on a goroutine that Shutdown waits for.
func (s *Server) Go(f func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

// Stop closes Stopped; later calls do nothing. A simulator calls it under its lock with dropping its
// connections, so that no connection registered under that lock outlives it.
func (s *Server) Stop() {
	s.once.Do(s.init)
	s.stopped.Do(func() { close(s.stop) })
}

// Stopped is closed once Stop was called.
func (s *Server) Stopped() <-chan struct{} {
	s.once.Do(s.init)
	return s.stop
}

func (s *Server) init() { s.stop = make(chan struct{}) }

// Shutdown stops the server started by Start (waiting up to 2 s for its requests) and then waits for
// every goroutine of Go; call it after Stop, without the simulator's lock.
func (s *Server) Shutdown() error {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	var err error
	if srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		err = srv.Shutdown(ctx)
	}
	s.wg.Wait()
	return err
}

func (s *Server) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}
