package news_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/cmd/engine/app/apptest"
)

const origin = "https://news.example.test"

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time                { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time)               { c.mu.Lock(); c.t = t; c.mu.Unlock() }
func at(s string) time.Time                    { t, _ := time.Parse(time.RFC3339, s); return t }
func q(e *apptest.Env, p string) *apptest.Resp { return e.Get(p) }

func start(t *testing.T, c *clock) *apptest.Env {
	t.Helper()
	o := apptest.Options{ManualFeed: true, Configure: func(cfg *app.Config) {
		cfg.AllowedOrigins = origin
		cfg.Firm.WebhookAllowPrivate = true // the test's feed and images are served on 127.0.0.1
	}}
	if c != nil {
		o.Now = c.now
	}
	return apptest.Start(t, o)
}

type page struct {
	Items []struct {
		ID, Title, PublishedAt string
		Roots                  []string
		ImageURL               *string
	} `json:"items"`
	NextCursor *string `json:"nextCursor"`
}

func wantCode(t *testing.T, r *apptest.Resp, status int, code string) {
	t.Helper()
	if r.Status != status || (code != "" && r.Map(t)["code"] != code) {
		t.Fatalf("got %d %s, want %d %s", r.Status, r.Body, status, code)
	}
}

func TestHeadlinesPageNewestFirst(t *testing.T) {
	e := start(t, nil)
	var all page
	q(e, "/api/news").JSON(t, &all)
	if len(all.Items) != 12 || all.NextCursor != nil {
		t.Fatalf("sample page: %d items, next %v", len(all.Items), all.NextCursor)
	}
	for i := 1; i < len(all.Items); i++ {
		if all.Items[i].PublishedAt > all.Items[i-1].PublishedAt {
			t.Fatalf("not newest first at %d", i)
		}
	}
	// keyset pages of 5 cover the list exactly once
	var ids []string
	path := "/api/news?limit=5"
	for pages := 0; ; pages++ {
		var p page
		q(e, path).JSON(t, &p)
		for _, it := range p.Items {
			ids = append(ids, it.ID)
		}
		if p.NextCursor == nil {
			if pages != 2 {
				t.Fatalf("%d pages", pages+1)
			}
			break
		}
		path = "/api/news?limit=5&cursor=" + *p.NextCursor
	}
	var want []string
	for _, it := range all.Items {
		want = append(want, it.ID)
	}
	if strings.Join(ids, ",") != strings.Join(want, ",") {
		t.Fatalf("paged %v\nwant  %v", ids, want)
	}
	// the root filter
	var crude page
	q(e, "/api/news?instrument=CL").JSON(t, &crude)
	if len(crude.Items) != 2 {
		t.Fatalf("CL items: %+v", crude.Items)
	}
	for _, it := range crude.Items {
		if !strings.Contains(strings.Join(it.Roots, ","), "CL") {
			t.Fatalf("untagged item in CL filter: %+v", it)
		}
	}
	var es page
	q(e, "/api/news?instrument=ESZ5").JSON(t, &es)
	if len(es.Items) == 0 {
		t.Fatal("a contract filters by its root")
	}
	wantCode(t, q(e, "/api/news?instrument=FOO"), 400, "invalid_request")
	wantCode(t, q(e, "/api/news?cursor=garbage"), 400, "invalid_cursor")
	wantCode(t, q(e, "/api/news?cursor="), 400, "invalid_cursor")
	wantCode(t, q(e, "/api/news?limit=0"), 400, "invalid_request")
	wantCode(t, q(e, "/api/news?limit=101"), 400, "invalid_request")

	// admission
	wantCode(t, e.Do(apptest.Req{Method: "GET", Path: "/api/news", Key: "-"}), 401, "invalid_key")
	wantCode(t, e.Do(apptest.Req{Method: "GET", Path: "/api/calendar", Key: "-"}), 401, "invalid_key")
	if r := e.Do(apptest.Req{Method: "GET", Path: "/api/news", Key: "-", Headers: map[string]string{"Origin": origin}}); r.Status != 200 {
		t.Fatalf("registered origin: %d", r.Status)
	}
	if r := e.Do(apptest.Req{Method: "GET", Path: "/api/news", Headers: map[string]string{"Origin": "https://elsewhere.example"}}); r.Status != 403 {
		t.Fatalf("foreign origin: %d", r.Status)
	}

	// sample thumbnails: keyless, only of known items
	var img *string
	var noImg string
	for _, it := range all.Items {
		if it.ImageURL != nil && img == nil {
			img = it.ImageURL
		}
		if it.ImageURL == nil {
			noImg = it.ID
		}
	}
	r := e.Do(apptest.Req{Method: "GET", Path: *img, Key: "-"})
	if r.Status != 200 || r.Header.Get("Content-Type") != "image/png" || !bytes.HasPrefix(r.Body, []byte("\x89PNG")) {
		t.Fatalf("thumbnail: %d %s", r.Status, r.Header.Get("Content-Type"))
	}
	wantCode(t, e.Do(apptest.Req{Method: "GET", Path: "/api/news/image/" + noImg, Key: "-"}), 404, "not_found")
	wantCode(t, e.Do(apptest.Req{Method: "GET", Path: "/api/news/image/nope", Key: "-"}), 404, "not_found")
}

const rssDoc = `<?xml version="1.0" encoding="UTF-8"?>
<rss version="2.0" xmlns:media="http://search.yahoo.com/mrss/">
<channel><title>Test Markets Wire</title><link>http://feed.test/</link><description>t</description>
<item><title>Gold jumps as &lt;b&gt;bullion&lt;/b&gt; demand surges</title><link>http://feed.test/a</link><guid>a-1</guid>
  <description>&lt;p&gt;Central banks bought more.&lt;/p&gt;</description><pubDate>Mon, 03 Jun 2024 10:00:00 GMT</pubDate>
  <media:thumbnail url="%[1]s/thumb.png"/></item>
<item><title>Crude slides on OPEC+ supply talk</title><link>http://feed.test/b</link><guid>b-1</guid>
  <pubDate>Mon, 03 Jun 2024 09:00:00 GMT</pubDate><enclosure url="%[1]s/page.png" type="image/png" length="10"/></item>
<item><title>Nasdaq record</title><link>http://feed.test/c</link><guid>c-1</guid>
  <pubDate>Mon, 03 Jun 2024 08:00:00 GMT</pubDate><media:content url="%[1]s/big.png" medium="image"/></item>
%[2]s
</channel></rss>`

func TestFeedIngestionStreamAndImageProxy(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde\x00\x00\x00\x0cIDATx\x9cc\xf8\xff\xff?\x00\x05\xfe\x02\xfe\xa7\x35\x81\x84\x00\x00\x00\x00IEND\xaeB`\x82")
	var thumbHits atomic.Int64
	var more atomic.Bool
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/feed.xml":
			extra := ""
			if more.Load() {
				extra = `<item><title>Treasury yields climb after payrolls</title><link>http://feed.test/d</link><guid>d-1</guid><pubDate>Mon, 03 Jun 2024 11:00:00 GMT</pubDate></item>`
			}
			w.Header().Set("Content-Type", "application/rss+xml")
			fmt.Fprintf(w, rssDoc, srv.URL, extra)
		case "/thumb.png":
			thumbHits.Add(1)
			w.Header().Set("Content-Type", "image/png")
			w.Write(png)
		case "/page.png": // claims to be an image, is a page
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte("<html>not an image</html>"))
		case "/big.png":
			w.Header().Set("Content-Type", "image/png")
			w.Write(append(append([]byte{}, png...), make([]byte, 3<<20)...))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	t.Setenv("ENGINE_NEWS_FEEDS", srv.URL+"/feed.xml")
	t.Setenv("ENGINE_NEWS_POLL", "1s")
	t.Setenv("ENGINE_NEWS_SAMPLE", "0")
	e := start(t, nil)

	var p page
	apptest.WaitFor(t, 10*time.Second, func() error {
		p = page{}
		q(e, "/api/news").JSON(t, &p)
		if len(p.Items) != 3 {
			return fmt.Errorf("%d items", len(p.Items))
		}
		return nil
	})
	first := p.Items[0]
	if first.Title != "Gold jumps as bullion demand surges" || first.PublishedAt != "2024-06-03T10:00:00Z" || strings.Join(first.Roots, ",") != "GC" {
		t.Fatalf("first item %+v", first)
	}
	if p.Items[1].Roots[0] != "CL" || strings.Join(p.Items[2].Roots, ",") != "NQ" {
		t.Fatalf("tags %+v", p.Items)
	}

	// thumbnails through the proxy: checked and cached
	for i := 0; i < 3; i++ {
		r := e.Do(apptest.Req{Method: "GET", Path: *first.ImageURL, Key: "-"})
		if r.Status != 200 || !bytes.Equal(r.Body, png) || r.Header.Get("Cache-Control") == "" {
			t.Fatalf("thumbnail %d: %d %s", i, r.Status, r.Body)
		}
	}
	if thumbHits.Load() != 1 {
		t.Fatalf("upstream fetched %d times, want 1 (cached)", thumbHits.Load())
	}
	wantCode(t, e.Do(apptest.Req{Method: "GET", Path: *p.Items[1].ImageURL, Key: "-"}), 502, "image_unavailable")
	wantCode(t, e.Do(apptest.Req{Method: "GET", Path: *p.Items[2].ImageURL, Key: "-"}), 502, "image_unavailable")

	// a new item on the feed arrives on the stream, and the root filter holds
	all := openSSE(t, e, "/api/news/stream")
	gold := openSSE(t, e, "/api/news/stream?instrument=GC")
	more.Store(true)
	ev := next(t, all)
	if ev.Name != "news_item" || ev.Data["title"] != "Treasury yields climb after payrolls" {
		t.Fatalf("event %+v", ev)
	}
	select {
	case ev := <-gold:
		t.Fatalf("GC stream got %+v", ev)
	case <-time.After(300 * time.Millisecond):
	}

	// ingested headlines survive a restart, with no feed configured any more
	t.Setenv("ENGINE_NEWS_FEEDS", "")
	e2 := e.Restart()
	var kept page
	q(e2, "/api/news").JSON(t, &kept)
	if len(kept.Items) != 4 || kept.Items[0].Title != "Treasury yields climb after payrolls" {
		t.Fatalf("after restart: %+v", kept.Items)
	}
}

func TestCalendarWindowAndReleaseNudges(t *testing.T) {
	c := &clock{t: at("2030-01-08T10:00:00Z")} // a Tuesday
	e := start(t, c)
	type cal struct {
		From, To string
		Events   []struct {
			ID, Title, Impact, Time string
			Forecast, Previous      *string
			Actual                  *string
		} `json:"events"`
	}
	var all cal
	q(e, "/api/calendar").JSON(t, &all)
	if all.From != "2030-01-07T00:00:00Z" || all.To != "2030-01-15T00:00:00Z" || len(all.Events) != 8 {
		t.Fatalf("default window: %s..%s %d events", all.From, all.To, len(all.Events))
	}
	byID := map[string]int{}
	for i, ev := range all.Events {
		byID[ev.ID] = i
		if i > 0 && ev.Time < all.Events[i-1].Time {
			t.Fatal("events not ascending")
		}
	}
	claims, cpi := all.Events[byID["c-claims"]], all.Events[byID["c-cpi"]]
	if claims.Actual == nil || *claims.Actual != "215K" || *claims.Forecast != "221K" {
		t.Fatalf("past event %+v", claims)
	}
	if cpi.Actual != nil || *cpi.Forecast != "0.2%" || cpi.Time != "2030-01-08T12:30:00Z" {
		t.Fatalf("upcoming event %+v", cpi)
	}
	var high cal
	q(e, "/api/calendar?impact=high&currency=usd").JSON(t, &high)
	for _, ev := range high.Events {
		if ev.Impact != "high" {
			t.Fatalf("impact filter: %+v", ev)
		}
	}
	if len(high.Events) != 3 {
		t.Fatalf("high USD events: %d", len(high.Events))
	}
	var day cal
	q(e, "/api/calendar?from=2030-01-08&to=2030-01-09").JSON(t, &day)
	if len(day.Events) != 3 {
		t.Fatalf("one day: %d events", len(day.Events))
	}
	wantCode(t, q(e, "/api/calendar?from=2030-01-01&to=2030-03-01"), 400, "invalid_window")
	wantCode(t, q(e, "/api/calendar?from=2030-01-09&to=2030-01-08"), 400, "invalid_window")
	wantCode(t, q(e, "/api/calendar?from=tomorrow"), 400, "invalid_request")
	wantCode(t, q(e, "/api/calendar?impact=huge"), 400, "invalid_request")

	// the release of an actual value nudges the stream
	nudges := openSSE(t, e, "/api/calendar/stream")
	c.set(at("2030-01-08T12:20:00Z"))
	ev := next(t, nudges)
	if ev.Name != "calendar_update" || fmt.Sprint(ev.Data["ids"]) != "[c-ecb-rate]" {
		t.Fatalf("nudge %+v", ev)
	}
	var after cal
	q(e, "/api/calendar?from=2030-01-08&to=2030-01-09").JSON(t, &after)
	for _, ev := range after.Events {
		if ev.ID == "c-ecb-rate" && (ev.Actual == nil || *ev.Actual != "4.25%") {
			t.Fatalf("released %+v", ev)
		}
		if ev.ID == "c-cpi" && ev.Actual != nil {
			t.Fatalf("not yet released %+v", ev)
		}
	}
}

type event = apptest.Event

func openSSE(t *testing.T, e *apptest.Env, path string) <-chan event {
	t.Helper()
	return e.Stream(path)
}

func next(t *testing.T, ch <-chan event) event {
	t.Helper()
	return apptest.Next(t, ch)
}
