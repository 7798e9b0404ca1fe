package news

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/mmcdole/gofeed"
)

//go:embed sample
var sampleFS embed.FS

type sampleDoc struct {
	Source string `json:"source"`
	News   []struct {
		ID         string   `json:"id"`
		Title      string   `json:"title"`
		Summary    string   `json:"summary"`
		URL        string   `json:"url"`
		Image      string   `json:"image"`
		MinutesAgo int      `json:"minutesAgo"`
		Roots      []string `json:"roots"`
	} `json:"news"`
	Calendar []struct {
		ID        string   `json:"id"`
		Title     string   `json:"title"`
		Country   string   `json:"country"`
		Currency  string   `json:"currency"`
		DayOffset int      `json:"dayOffset"`
		Time      string   `json:"time"`
		Impact    string   `json:"impact"`
		Forecast  *string  `json:"forecast"`
		Previous  *string  `json:"previous"`
		Actual    *string  `json:"actual"`
		Roots     []string `json:"roots"`
	} `json:"calendar"`
}

// Sample reads the shipped sample set with its times laid relative to now:
// headlines minutes ago, calendar events on days around today (UTC). An event
// whose time has not come holds its actual value back until Release.
func Sample(now time.Time) ([]Item, []Event, error) {
	return readSample(sampleFS, "sample/sample.json", now)
}

// SampleImage returns a shipped thumbnail by file name.
func SampleImage(name string) ([]byte, bool) {
	if strings.Contains(name, "/") || strings.Contains(name, "..") {
		return nil, false
	}
	b, err := sampleFS.ReadFile("sample/" + name)
	return b, err == nil
}

func readSample(fsys embed.FS, path string, now time.Time) ([]Item, []Event, error) {
	b, err := fsys.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var doc sampleDoc
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, nil, fmt.Errorf("news: sample: %w", err)
	}
	items := make([]Item, 0, len(doc.News))
	for _, n := range doc.News {
		it := Item{ID: n.ID, Source: doc.Source, Title: n.Title, Summary: n.Summary, URL: n.URL,
			PublishedAt: now.Add(-time.Duration(n.MinutesAgo) * time.Minute).UTC().Truncate(time.Second),
			Roots:       Tag(n.Title+" "+n.Summary, n.Roots...)}
		if n.Image != "" {
			it.ImageURL = "sample:" + n.Image
		}
		items = append(items, it)
	}
	day := now.UTC().Truncate(24 * time.Hour)
	events := make([]Event, 0, len(doc.Calendar))
	for _, c := range doc.Calendar {
		hm, err := time.Parse("15:04", c.Time)
		if err != nil {
			return nil, nil, fmt.Errorf("news: sample event %s: %w", c.ID, err)
		}
		at := day.AddDate(0, 0, c.DayOffset).Add(time.Duration(hm.Hour())*time.Hour + time.Duration(hm.Minute())*time.Minute)
		ev := Event{ID: c.ID, Title: c.Title, Country: c.Country, Currency: c.Currency, Time: at, Impact: c.Impact,
			Forecast: c.Forecast, Previous: c.Previous, Roots: Tag(c.Title, c.Roots...), UpdatedAt: now.UTC()}
		if c.Actual != nil {
			if at.After(now) {
				ev.pending = c.Actual
			} else {
				ev.Actual = c.Actual
			}
		}
		events = append(events, ev)
	}
	return items, events, nil
}

// MaxFeedBytes bounds one feed document.
const MaxFeedBytes = 5 << 20

// FetchFeed reads one RSS or Atom feed through gofeed and maps its items;
// items are tagged with futures roots from their title, summary and categories.
func FetchFeed(ctx context.Context, client *http.Client, url string, now time.Time) ([]Item, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/rss+xml, application/atom+xml, application/xml;q=0.9, */*;q=0.5")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("news: feed: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("news: feed answered %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxFeedBytes+1))
	if err != nil {
		return nil, fmt.Errorf("news: feed: %w", err)
	}
	if len(body) > MaxFeedBytes {
		return nil, fmt.Errorf("news: feed larger than %d bytes", MaxFeedBytes)
	}
	feed, err := gofeed.NewParser().Parse(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("news: feed: %w", err)
	}
	source := strings.TrimSpace(feed.Title)
	if source == "" {
		source = url
	}
	out := make([]Item, 0, len(feed.Items))
	for _, fi := range feed.Items {
		if fi == nil || strings.TrimSpace(fi.Title) == "" {
			continue
		}
		key := fi.GUID
		if key == "" {
			key = fi.Link
		}
		if key == "" {
			key = fi.Title + "|" + fi.Published
		}
		sum := sha256.Sum256([]byte(url + "|" + key))
		it := Item{ID: "f-" + hex.EncodeToString(sum[:12]), Source: source, Title: strings.TrimSpace(stripTags(fi.Title)),
			Summary: clip(strings.TrimSpace(stripTags(fi.Description)), 500), URL: fi.Link, PublishedAt: now.UTC().Truncate(time.Second)}
		switch {
		case fi.PublishedParsed != nil:
			it.PublishedAt = fi.PublishedParsed.UTC()
		case fi.UpdatedParsed != nil:
			it.PublishedAt = fi.UpdatedParsed.UTC()
		}
		it.ImageURL = imageOf(fi)
		it.Roots = Tag(it.Title + " " + it.Summary + " " + strings.Join(fi.Categories, " "))
		out = append(out, it)
	}
	return out, nil
}

func imageOf(fi *gofeed.Item) string {
	ok := func(u string) bool { return strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://") }
	if fi.Image != nil && ok(fi.Image.URL) {
		return fi.Image.URL
	}
	for _, e := range fi.Enclosures {
		if e != nil && strings.HasPrefix(e.Type, "image/") && ok(e.URL) {
			return e.URL
		}
	}
	for _, name := range []string{"thumbnail", "content"} {
		for _, x := range fi.Extensions["media"][name] {
			if u := x.Attrs["url"]; ok(u) && (name == "thumbnail" || strings.HasPrefix(x.Attrs["type"], "image/") || x.Attrs["medium"] == "image") {
				return u
			}
		}
	}
	return ""
}

// stripTags removes markup from a feed's HTML text and unescapes the common entities.
func stripTags(s string) string {
	var b strings.Builder
	in := false
	for _, r := range s {
		switch {
		case r == '<':
			in = true
		case r == '>' && in:
			in = false
			b.WriteByte(' ')
		case !in:
			b.WriteRune(r)
		}
	}
	out := strings.NewReplacer("&amp;", "&", "&lt;", "<", "&gt;", ">", "&quot;", `"`, "&#39;", "'", "&nbsp;", " ").Replace(b.String())
	return strings.Join(strings.Fields(out), " ")
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
