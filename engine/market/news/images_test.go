package news

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/svc/engine/engine/egress"
)

var onePixel = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde\x00\x00\x00\x0cIDATx\x9cc\xf8\xff\xff?\x00\x05\xfe\x02\xfe\xa7\x35\x81\x84\x00\x00\x00\x00IEND\xaeB`\x82")

func imageServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/a.png":
			w.Header().Set("Content-Type", "image/png")
			w.Write(onePixel)
		case "/moved.png":
			http.Redirect(w, r, "/a.png", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// TestPublicImagesReachOnlyThePublicInternet: a thumbnail on a loopback
// address or a local name is refused before any request is made.
func TestPublicImagesReachOnlyThePublicInternet(t *testing.T) {
	srv, hits := imageServer(t)
	u, _ := url.Parse(srv.URL)
	im := NewPublicImages(false)
	for _, target := range []string{srv.URL + "/a.png", "http://localhost:" + u.Port() + "/a.png", "http://2130706433:" + u.Port() + "/a.png",
		"http://[::ffff:127.0.0.1]:" + u.Port() + "/a.png", "http://169.254.169.254/latest/meta-data/x.png"} {
		_, err := im.Get(context.Background(), Item{ID: "i", ImageURL: target})
		var e *egress.Error
		if !errors.Is(err, ErrImageUnavailable) || !errors.As(err, &e) {
			t.Fatalf("%s: %v", target, err)
		}
	}
	if hits.Load() != 0 {
		t.Fatalf("the server saw %d requests", hits.Load())
	}
}

// TestPublicImagesFetchOnlyTheURLTheFeedNamed: a redirect is not followed.
func TestPublicImagesFetchOnlyTheURLTheFeedNamed(t *testing.T) {
	srv, hits := imageServer(t)
	im := NewPublicImages(true) // the server is on 127.0.0.1
	img, err := im.Get(context.Background(), Item{ID: "i", ImageURL: srv.URL + "/a.png"})
	if err != nil || img.Type != "image/png" {
		t.Fatalf("%v %v", img.Type, err)
	}
	if _, err := im.Get(context.Background(), Item{ID: "j", ImageURL: srv.URL + "/moved.png"}); !errors.Is(err, ErrImageUnavailable) {
		t.Fatalf("redirect: %v", err)
	}
	if hits.Load() != 2 {
		t.Fatalf("the server saw %d requests, want 2 (no redirect followed)", hits.Load())
	}
	if _, err := im.Get(context.Background(), Item{ID: "k", ImageURL: "ftp://example.com/a.png"}); !errors.Is(err, ErrNoImage) {
		t.Fatalf("ftp: %v", err)
	}
}
