package news

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/engine/market/news"
)

// BenchmarkHeadlinesPage50Of1M serves a page of 50 headlines, past a cursor
// in the middle and filtered by root, with 1,000,000 stored items; through the
// handler, JSON included.
func BenchmarkHeadlinesPage50Of1M(b *testing.B) {
	svc, err := news.New(news.Config{})
	if err != nil {
		b.Fatal(err)
	}
	roots := [][]string{{"ES"}, {"NQ", "ES"}, {"CL"}, {"GC"}, {"ZN", "ZB"}, {"6E"}, {}}
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	const n = 1_000_000
	for i := 0; i < n; i++ {
		svc.News.Add(news.Item{ID: fmt.Sprintf("b-%07d", i), Source: "Bench Wire", Title: fmt.Sprintf("Headline number %d moves markets", i),
			Summary: "A summary of the headline.", URL: "https://example.com/n", PublishedAt: start.Add(time.Duration(i) * time.Second),
			Roots: roots[i%len(roots)]})
	}
	if svc.News.Len() != n {
		b.Fatalf("stored %d", svc.News.Len())
	}
	h := &Handlers{n: &Deps{News: svc, Products: market.Products(), Now: time.Now}}
	mid := news.Cursor{T: start.Add(n / 2 * time.Second).UnixNano(), ID: fmt.Sprintf("b-%07d", n/2)}.Encode()
	paths := []string{"/api/news?limit=50", "/api/news?limit=50&cursor=" + mid, "/api/news?limit=50&instrument=ES&cursor=" + mid}
	for j, p := range paths {
		b.Run(map[int]string{0: "newest", 1: "cursor", 2: "cursor+root"}[j], func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				w := httptest.NewRecorder()
				if err := h.List(w, httptest.NewRequest("GET", p, nil)); err != nil || w.Code != 200 {
					b.Fatal(err, w.Code)
				}
			}
		})
	}
}
