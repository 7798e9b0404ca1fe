package app

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/svc/engine/engine"
	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/provider/tradovate"
)

// TradovateConfig are the settings of the built-in futures provider, a
// trader's own Tradovate login:
//
//	ENGINE_TRADOVATE_ENV            the environments served, live and/or demo, comma-separated; the first is
//	                                the environment of a link that names none (default live,demo)
//	ENGINE_TRADOVATE_REST_URL       the live environment's REST base (default https://live.tradovateapi.com/v1)
//	ENGINE_TRADOVATE_WS_URL         its user-data socket (default wss://live.tradovateapi.com/v1/websocket)
//	ENGINE_TRADOVATE_MD_URL         its market-data socket (default wss://md.tradovateapi.com/v1/websocket)
//	ENGINE_TRADOVATE_DEMO_REST_URL  the demo environment's REST base (default https://demo.tradovateapi.com/v1)
//	ENGINE_TRADOVATE_DEMO_WS_URL    its user-data socket (default wss://demo.tradovateapi.com/v1/websocket)
//	ENGINE_TRADOVATE_DEMO_MD_URL    its market-data socket (default wss://md-demo.tradovateapi.com/v1/websocket)
//	ENGINE_TRADOVATE_APP_ID         the engine's application at Tradovate (appId), sent with every sign-in
//	ENGINE_TRADOVATE_APP_VERSION    its version (appVersion, default 1.0)
//	ENGINE_TRADOVATE_CID            its API key's id (cid)
//	ENGINE_TRADOVATE_SEC            its API key's secret (sec); never logged
//	ENGINE_TRADOVATE_DEVICE_ID      a stable id of this engine (deviceId, default svc-engine)
//
// ENGINE_PROVIDER_ALLOW_PRIVATE lets it reach a simulator on loopback, as
// it does Binance's.
type TradovateConfig struct {
	Envs                        string
	REST, WS, MD                string
	DemoREST, DemoWS, DemoMD    string
	AppID, AppVersion, CID, Sec string
	DeviceID                    string
}

// String never shows the application's secret.
func (c TradovateConfig) String() string {
	c.Sec = "[redacted]"
	type plain TradovateConfig
	return fmt.Sprintf("%+v", plain(c))
}

func tradovateFlags(fs *flag.FlagSet, c *TradovateConfig, env func(string, string) string) {
	fs.StringVar(&c.Envs, "tradovate-env", env("ENGINE_TRADOVATE_ENV", "live,demo"), "the Tradovate environments linked, live and/or demo, comma-separated; the first is a link's default (ENGINE_TRADOVATE_ENV)")
	fs.StringVar(&c.REST, "tradovate-rest-url", env("ENGINE_TRADOVATE_REST_URL", ""), "Tradovate live REST base; empty: "+tradovate.LiveRestURL+" (ENGINE_TRADOVATE_REST_URL)")
	fs.StringVar(&c.WS, "tradovate-ws-url", env("ENGINE_TRADOVATE_WS_URL", ""), "Tradovate live user-data socket; empty: "+tradovate.LiveWSURL+" (ENGINE_TRADOVATE_WS_URL)")
	fs.StringVar(&c.MD, "tradovate-md-url", env("ENGINE_TRADOVATE_MD_URL", ""), "Tradovate live market-data socket; empty: "+tradovate.LiveMDURL+" (ENGINE_TRADOVATE_MD_URL)")
	fs.StringVar(&c.DemoREST, "tradovate-demo-rest-url", env("ENGINE_TRADOVATE_DEMO_REST_URL", ""), "Tradovate demo REST base; empty: "+tradovate.DemoRestURL+" (ENGINE_TRADOVATE_DEMO_REST_URL)")
	fs.StringVar(&c.DemoWS, "tradovate-demo-ws-url", env("ENGINE_TRADOVATE_DEMO_WS_URL", ""), "Tradovate demo user-data socket; empty: "+tradovate.DemoWSURL+" (ENGINE_TRADOVATE_DEMO_WS_URL)")
	fs.StringVar(&c.DemoMD, "tradovate-demo-md-url", env("ENGINE_TRADOVATE_DEMO_MD_URL", ""), "Tradovate demo market-data socket; empty: "+tradovate.DemoMDURL+" (ENGINE_TRADOVATE_DEMO_MD_URL)")
	fs.StringVar(&c.AppID, "tradovate-app-id", env("ENGINE_TRADOVATE_APP_ID", ""), "the engine's application at Tradovate, appId (ENGINE_TRADOVATE_APP_ID)")
	fs.StringVar(&c.AppVersion, "tradovate-app-version", env("ENGINE_TRADOVATE_APP_VERSION", "1.0"), "its appVersion (ENGINE_TRADOVATE_APP_VERSION)")
	fs.StringVar(&c.CID, "tradovate-cid", env("ENGINE_TRADOVATE_CID", ""), "its API key's id, cid (ENGINE_TRADOVATE_CID)")
	fs.StringVar(&c.Sec, "tradovate-sec", env("ENGINE_TRADOVATE_SEC", ""), "its API key's secret, sec; prefer the environment variable (ENGINE_TRADOVATE_SEC)")
	fs.StringVar(&c.DeviceID, "tradovate-device-id", env("ENGINE_TRADOVATE_DEVICE_ID", "svc-engine"), "a stable id of this engine, deviceId (ENGINE_TRADOVATE_DEVICE_ID)")
}

// envs are the environments served, the default first.
func (c TradovateConfig) envs() ([]string, error) {
	var out []string
	for _, e := range strings.Split(c.Envs, ",") {
		e = strings.TrimSpace(e)
		switch {
		case e == "":
		case e != provider.EnvLive && e != provider.EnvDemo:
			return nil, fmt.Errorf("ENGINE_TRADOVATE_ENV %q: each environment is live or demo", c.Envs)
		case !slices.Contains(out, e):
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("ENGINE_TRADOVATE_ENV names no environment: live, demo or both")
	}
	return out, nil
}

func (c TradovateConfig) validate() error {
	var errs []error
	if _, err := c.envs(); err != nil {
		errs = append(errs, err)
	}
	for _, o := range []tradovate.Options{{RestURL: c.REST, WSURL: c.WS, MDURL: c.MD}, {RestURL: c.DemoREST, WSURL: c.DemoWS, MDURL: c.DemoMD}} {
		if err := o.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("ENGINE_TRADOVATE_*: %w", err))
		}
	}
	return errors.Join(errs...)
}

// openTradovate makes the Tradovate provider of each environment served:
// the default environment's is the one the engine lists.
func openTradovate(c TradovateConfig, allowPrivate bool) (provider.Provider, engine.LoginProvider, error) {
	envs, err := c.envs()
	if err != nil {
		return nil, engine.LoginProvider{}, err
	}
	if c.CID == "" || c.Sec == "" {
		slog.Warn("providers: ENGINE_TRADOVATE_CID or ENGINE_TRADOVATE_SEC is not set: Tradovate signs in only with the engine's application credentials")
	}
	app := tradovate.App{ID: c.AppID, Version: c.AppVersion, CID: c.CID, Secret: c.Sec, DeviceID: c.DeviceID}
	lp := engine.LoginProvider{Environments: map[string]provider.TokenProvider{}, Default: envs[0]}
	for _, e := range envs {
		// The adapter's own transport: a request it gives up resets its
		// connection, which its never-placed rule counts on (ReceiveWindow).
		o := tradovate.Options{App: app, Demo: e == provider.EnvDemo, RestURL: c.REST, WSURL: c.WS, MDURL: c.MD,
			AllowPrivate: allowPrivate}
		if o.Demo {
			o.RestURL, o.WSURL, o.MDURL = c.DemoREST, c.DemoWS, c.DemoMD
		}
		p, err := tradovate.New(o)
		if err != nil {
			return nil, engine.LoginProvider{}, fmt.Errorf("ENGINE_TRADOVATE_*: %w", err)
		}
		lp.Environments[e] = p
	}
	return lp.Environments[lp.Default], lp, nil
}
