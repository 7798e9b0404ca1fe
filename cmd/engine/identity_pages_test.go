package main_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/engine/mail"
	chrome "github.com/svc/engine/gateway/connect/browser"
)

// mailedLink waits for the newest mail to addr to have subject and answers
// the link in it that opens path (the whole URL, as a person clicks it).
func mailedLink(t *testing.T, dir, addr, subject, path string) string {
	t.Helper()
	re := regexp.MustCompile(`https?://\S+` + regexp.QuoteMeta(path) + `\?token=\S+`)
	var link string
	enginetest.WaitFor(t, 10*time.Second, func() error {
		m, file, err := mail.Latest(filepath.Join(dir, "mail"), addr)
		if err != nil {
			return err
		}
		if m.Subject != subject {
			return fmt.Errorf("newest mail to %s (%s) is %q, want %q", addr, file, m.Subject, subject)
		}
		if link = re.FindString(m.Text); link == "" {
			return fmt.Errorf("mail %s links to no %s: %s", file, path, m.Text)
		}
		return nil
	})
	return link
}

// Issue 41, item 3: the links in the verification and reset mails open
// pages the engine serves at its default base URL. In a real browser
// (headless Chromium) the verification page verifies on a click (opening
// it spends nothing), after which the user may issue a key; the reset page
// sets a new password that then signs in, and the old one no longer does.
func TestMailLinksOpenWorkingPages(t *testing.T) {
	bin, dir, addr := build(t), t.TempDir(), freePort(t)
	p := start(t, bin, dir, addr) // no ENGINE_BASE_URL: the default
	const email, password, newPassword = "pages@example.com", "the first password", "the second password"
	b := &browser{t: t, base: p.base}
	if st, m := b.do("POST", "/api/auth/signup", map[string]string{"email": email, "password": password}); st != 201 {
		t.Fatalf("signup: %d %v", st, m)
	}
	verify := mailedLink(t, dir, email, "Verify your email address", "/verify-email")

	// A scanner fetching the link spends nothing.
	resp, err := http.Get(verify)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	if resp.StatusCode != 200 || !regexp.MustCompile(`default-src 'none'.*script-src 'nonce-`).MatchString(csp) ||
		resp.Header.Get("Referrer-Policy") != "no-referrer" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("the verification page: %d, CSP %q, headers %v", resp.StatusCode, csp, resp.Header)
	}
	if st, m := b.do("POST", "/api/auth/login", map[string]string{"email": email, "password": password}); st != 200 {
		t.Fatalf("login: %d %v", st, m)
	}
	if st, m := b.do("POST", "/api/keys", map[string]string{"name": "before"}); st != 403 || m["code"] != "email_unverified" {
		t.Fatalf("a key before verifying: %d %v", st, m)
	}

	ctx := chrome.New(t, 60*time.Second)
	chrome.Run(t, ctx,
		chromedp.Navigate(verify),
		chromedp.WaitVisible(chromedp.CSS("#confirm")),
		// Another password (a squatter's who signed up first) verifies nothing.
		chromedp.SendKeys(chromedp.CSS("#password"), "not the password at all"),
		chromedp.Click(chromedp.CSS("#confirm")),
		chromedp.WaitVisible(chromedp.CSS("#error")),
	)
	if st, m := b.do("POST", "/api/keys", map[string]string{"name": "wrong"}); st != 403 || m["code"] != "email_unverified" {
		t.Fatalf("a key after a wrong password on the page: %d %v", st, m)
	}
	chrome.Run(t, ctx,
		chromedp.Navigate(verify),
		chromedp.WaitVisible(chromedp.CSS("#confirm")),
		chromedp.SendKeys(chromedp.CSS("#password"), password),
		chromedp.Click(chromedp.CSS("#confirm")),
		chromedp.WaitVisible(chromedp.CSS("#verified")),
	)
	if st, m := b.do("POST", "/api/keys", map[string]string{"name": "after"}); st != 201 {
		t.Fatalf("a key after verifying in the browser: %d %v", st, m)
	}
	// The link is spent: opened again, the page says so.
	chrome.Run(t, ctx,
		chromedp.Navigate(verify),
		chromedp.WaitVisible(chromedp.CSS("#confirm")),
		chromedp.SendKeys(chromedp.CSS("#password"), password),
		chromedp.Click(chromedp.CSS("#confirm")),
		chromedp.WaitVisible(chromedp.CSS("#error")),
	)

	if st, m := b.do("POST", "/api/auth/password-reset", map[string]string{"email": email}); st != 202 {
		t.Fatalf("reset: %d %v", st, m)
	}
	reset := mailedLink(t, dir, email, "Reset your password", "/password-reset")
	chrome.Run(t, ctx,
		chromedp.Navigate(reset),
		chromedp.WaitVisible(chromedp.CSS("#password")),
		chromedp.SendKeys(chromedp.CSS("#password"), newPassword),
		chromedp.SendKeys(chromedp.CSS("#again"), newPassword),
		chromedp.Click(chromedp.CSS("#save")),
		chromedp.WaitVisible(chromedp.CSS("#done")),
	)
	if st, m := b.do("POST", "/api/auth/login", map[string]string{"email": email, "password": newPassword}); st != 200 {
		t.Fatalf("sign-in with the password set in the browser: %d %v", st, m)
	}
	if st, m := b.do("POST", "/api/auth/login", map[string]string{"email": email, "password": password}); st != 401 {
		t.Fatalf("sign-in with the old password: %d %v", st, m)
	}
}
