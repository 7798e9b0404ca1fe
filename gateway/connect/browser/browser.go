// Package browser runs a headless Chromium for Go tests through chromedp.
//
// Tests that need a browser fail, never skip, when none is installed: CI
// installs Debian's chromium (see .ci/run), and a skipped browser test would
// let the behaviour it guards go untested unnoticed.
package browser

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// names are the browser binaries New looks for on PATH, in order, after the
// path or name in the environment variable CHROMIUM.
var names = [...]string{"chromium", "chromium-browser", "google-chrome"}

// New starts a headless browser with a fresh profile under t.TempDir and
// returns a chromedp context for one tab in it. The browser lives at most
// timeout: the returned context ends then, and every action on it fails. The
// browser is closed, and its process waited for, when the test ends. New fails
// the test when no browser is found or it does not start.
func New(t testing.TB, timeout time.Duration) context.Context {
	t.Helper()
	path, err := find()
	if err != nil {
		t.Fatalf("no browser for this test: %v; install Debian's chromium (apt-get install chromium) or set CHROMIUM to a Chrome binary", err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.Flag("use-mock-keychain", true),
	}
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tabCtx, cancelTab := chromedp.NewContext(allocCtx)
	// chromedp ties the browser's life to the context of the first Run, so
	// starting it under the deadline bounds the whole browser by timeout.
	ctx, cancelTimeout := context.WithTimeout(tabCtx, timeout)
	t.Cleanup(func() {
		closeCtx, cancel := context.WithTimeout(tabCtx, 5*time.Second)
		defer cancel()
		_ = chromedp.Cancel(closeCtx) // graceful close; an error only means it is gone already
		cancelTimeout()
		cancelTab()
		cancelAlloc() // waits for the browser process, before TempDir's removal
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start browser %s: %v", path, err)
	}
	return ctx
}

// Run runs the actions in order on ctx, a context from New, and fails the
// test at the first error.
func Run(t testing.TB, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

// Get runs one action that returns a value, failing the test on an error.
func Get[T any](t testing.TB, ctx context.Context, action chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, action)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	return v
}

// find returns the browser binary: $CHROMIUM if set, else the first of names
// on PATH.
func find() (string, error) {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return exec.LookPath(p)
	}
	var err error
	for _, name := range names {
		var p string
		if p, err = exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", err
}

// Frame is the page's iframe matching sel, with its document in the page's
// DOM tree (a frame of the same site stays in the page's process; one of
// another site does not, and fails the test saying so).
func Frame(t testing.TB, ctx context.Context, sel string) *chromedp.Node {
	t.Helper()
	nodes := Get(t, ctx, chromedp.Nodes(chromedp.CSS(sel)))
	if len(nodes) == 0 || nodes[0].ContentDocument == nil {
		t.Fatalf("the frame %s has no document in the page's DOM tree: is it out of process (another site)?", sel)
	}
	return nodes[0]
}
