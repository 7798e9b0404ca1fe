package app

import (
	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway"
	"github.com/svc/engine/gateway/exitplans"
	firmgw "github.com/svc/engine/gateway/firm"
	"github.com/svc/engine/gateway/identity"
	marketgw "github.com/svc/engine/gateway/market"
	newsgw "github.com/svc/engine/gateway/news"
	"github.com/svc/engine/gateway/operator"
)

// areas configures the route areas beyond trading, account and risk; the
// route table itself is gateway/routes.go.
func areas(a *App, cfg Config) (gateway.Areas, error) {
	price, err := events.ParseDecimal(cfg.Firm.UsagePrice)
	if err != nil {
		price = events.Int(0)
	}
	cur := cfg.Firm.UsageCurrency
	if cur == "" {
		cur = "USD"
	}
	connect, err := connectConfig(a, cfg)
	if err != nil {
		return gateway.Areas{}, err
	}
	out := gateway.Areas{
		Market: &marketgw.Market{Catalog: a.Engine.Catalog(), Products: market.Products(), Feed: a.Market.Feed, Bars: a.Market.Bars,
			Futures: a.Market.Futures, Now: a.Now, Done: a.Hub.Done()},
		News:     &newsgw.Deps{News: a.Market.News, Products: market.Products(), Now: a.Now, Done: a.Hub.Done()},
		Firm:     &firmgw.Config{Webhooks: a.firm.reactor, UsagePrice: price, UsageCurrency: cur},
		Operator: &operator.Config{Now: a.Now},
		Identity: &identity.Config{Mail: a.mailer, BaseURL: cfg.BaseURL, Now: a.Now, Done: a.Hub.Done()},
		Exits:    &exitplans.Config{Tokens: a.previews, Now: a.Now},
		Connect:  connect,
	}
	out.Challenges = challengesArea(cfg) // nil unless CHALLENGES_ENABLED (challenges.go)
	return out, nil
}
