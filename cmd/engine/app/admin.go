package app

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	firmcmd "github.com/svc/engine/commands/firm"
	tenantcmd "github.com/svc/engine/commands/tenant"
	venuecmd "github.com/svc/engine/commands/venue"
	"github.com/svc/engine/events"
	evfirm "github.com/svc/engine/events/firm"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/auth"
	"github.com/svc/engine/gateway/connect/statement"
	"github.com/svc/engine/gateway/identity"
	"github.com/svc/engine/projections"
)

// Admin is `engine admin <action> [flags]`: the operator's way into a
// production engine that has no user yet. Each action writes through the same
// commands as the API and prints one JSON line; a secret is printed that once
// and stored only as a digest. With an engine running on the data directory
// (ENGINE_DATA_DIR), the action is sent to it over its admin socket
// (AdminSocket, a unix socket only the directory's owner reaches) and that
// engine runs it, without stopping; with none, admin opens the log the
// engine's settings name itself (NATS_URL, or the embedded files under
// ENGINE_DATA_DIR) and rebuilds read models in memory for the run, never
// writing PostgreSQL. `engine admin -h` lists the actions, `engine admin
// <action> -h` one action's flags; both exit 0.
func Admin(ctx context.Context, args []string, getenv func(string) string, out, errOut io.Writer) error {
	if len(args) == 0 || isHelp(args[0]) || args[0] == "help" {
		adminUsage(out)
		if len(args) == 0 {
			return errors.New("engine admin: an action is required")
		}
		return flag.ErrHelp
	}
	action := args[0]
	spec, ok := adminActions[action]
	if !ok {
		adminUsage(errOut)
		return fmt.Errorf("engine admin: unknown action %q", action)
	}
	fs := flag.NewFlagSet("engine admin "+action, flag.ContinueOnError)
	fs.SetOutput(errOut)
	var req adminRequest
	req.Action = action
	stdin := false
	for _, f := range spec.flags {
		switch f {
		case "email":
			if action == "release-hold" {
				fs.StringVar(&req.Email, "email", "", "the operator's email address, recorded as who released the hold (optional)")
			} else {
				fs.StringVar(&req.Email, "email", "", "the user's email address (required)")
			}
		case "account":
			fs.StringVar(&req.Account, "account", "", "the account's id, its accountId (required)")
		case "verified":
			fs.BoolVar(&req.Verified, "verified", false, "mark the email verified")
		case "password-stdin":
			fs.BoolVar(&stdin, "password-stdin", false, "read the password from the first line of standard input; otherwise one is made and printed")
		case "venue":
			fs.StringVar(&req.Venue, "venue", "", "the venue id (required)")
		case "scopes":
			fs.StringVar(&req.Scopes, "scopes", "account:read,account:write", "comma-separated scopes; empty revokes the grant")
		case "firm":
			fs.StringVar(&req.Firm, "firm", "", "the firm's name (required)")
		case "name":
			fs.StringVar(&req.Name, "name", "admin", spec.name)
		case "org":
			fs.StringVar(&req.Org, "org", "", "the organization the venue belongs to; the -email user must own it (required)")
		}
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: engine admin %s %s [engine flags]\n\n%s\n\n", action, spec.synopsis, spec.about)
		fs.PrintDefaults()
		fmt.Fprintln(fs.Output(), "\nEngine flags and settings (ENGINE_DATA_DIR, NATS_URL, ...) are the engine's own: engine -h.")
	}
	// The engine's own settings choose the log: flags that are not the
	// action's go to the engine's configuration.
	var own, engineArgs []string
	for i := 1; i < len(args); i++ {
		if isHelp(args[i]) {
			fs.SetOutput(out)
			fs.Usage()
			return flag.ErrHelp
		}
		k, _, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if fs.Lookup(k) == nil {
			engineArgs = append(engineArgs, args[i])
			continue
		}
		own = append(own, args[i])
		if !hasValue && !isBool(fs, k) && i+1 < len(args) {
			i++
			own = append(own, args[i])
		}
	}
	if err := fs.Parse(own); err != nil {
		return err
	}
	cfg, err := ParseConfig(engineArgs, getenv, errOut)
	if err != nil {
		return err
	}
	cfg.DatabaseURL = ""                // the run's read models live in memory: never a second writer to PostgreSQL
	if action == "connect-public-key" { // reads the key only, not the log
		key, err := statementKey(cfg)
		if err != nil {
			return err
		}
		return json.NewEncoder(out).Encode(map[string]string{"action": action, "publicKey": statement.PublicKeyText(key.Public().(ed25519.PublicKey))})
	}
	slog.SetDefault(slog.New(slog.NewJSONHandler(errOut, &slog.HandlerOptions{Level: slog.LevelWarn})))
	generated := false
	if action == "create-user" {
		if stdin {
			line, err := bufio.NewReader(os.Stdin).ReadString('\n')
			if err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			req.Password = strings.TrimRight(line, "\r\n")
		} else {
			req.Password, generated = auth.NewKey("")[:24], true
		}
	}
	if err := req.check(); err != nil {
		return err
	}
	result, err := adminOnline(ctx, cfg, req)
	if errors.Is(err, errNoAdminSocket) {
		result, err = adminOffline(ctx, cfg, req)
	}
	if err != nil {
		return err
	}
	if generated {
		result["password"] = req.Password
	}
	return json.NewEncoder(out).Encode(result)
}

// adminAction is one action of engine admin: its flags and its help.
type adminAction struct {
	flags    []string
	synopsis string
	about    string
	name     string // the -name flag's meaning, where it has one
}

var adminActions = map[string]adminAction{
	"create-user": {flags: []string{"email", "verified", "password-stdin"}, synopsis: "-email E [-verified] [-password-stdin]",
		about: "Makes a user with a password (printed once unless read from standard input)."},
	"verify": {flags: []string{"email"}, synopsis: "-email E", about: "Marks a user's email verified."},
	"grant-operator": {flags: []string{"email", "venue", "scopes"}, synopsis: "-email E -venue V [-scopes account:read,account:write]",
		about: "Grants (or, with empty -scopes, revokes) a user's operator scopes on a venue."},
	"issue-partner-key": {flags: []string{"email", "firm"}, synopsis: "-firm NAME -email E",
		about: "Makes a firm tenant and issues its partner key (printed once)."},
	"issue-key": {flags: []string{"email", "name"}, synopsis: "-email E [-name N]", name: "the key's name",
		about: "Issues a trading key for a user (printed once)."},
	"create-venue": {flags: []string{"email", "org", "name"}, synopsis: "-email OWNER -org ORG -name NAME", name: "the venue's name",
		about: "Creates a venue of an organization the -email user owns."},
	"release-hold": {flags: []string{"account", "email"}, synopsis: "-account ACCOUNT_ID [-email OPERATOR]",
		about: "Releases an account's reconciliation hold; the door for accounts no venue operator reaches (a trader's own linked provider account)."},
	"connect-public-key": {synopsis: "", about: "Prints production's Connect statement public key, for the sandbox's ENGINE_CONNECT_PRODUCTION_KEY."},
}

// adminUsage lists the actions.
func adminUsage(w io.Writer) {
	fmt.Fprintln(w, "Usage: engine admin <action> [flags] [engine flags]")
	fmt.Fprintln(w, "\nActions (engine admin <action> -h for one action's flags):")
	names := make([]string, 0, len(adminActions))
	for n := range adminActions {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-19s %s\n", n, adminActions[n].about)
	}
	fmt.Fprintln(w, "\nWith an engine running on ENGINE_DATA_DIR the action is sent to it over "+AdminSocket+
		" in that directory and it goes on serving; with none, admin opens the log itself.")
}

func isHelp(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" || arg == "--h" }

// adminRequest is one action as engine admin sends it to a running engine.
type adminRequest struct {
	Action   string `json:"action"`
	Email    string `json:"email"`
	Verified bool   `json:"verified,omitempty"`
	Password string `json:"password,omitempty"`
	Venue    string `json:"venue,omitempty"`
	Scopes   string `json:"scopes,omitempty"`
	Firm     string `json:"firm,omitempty"`
	Name     string `json:"name,omitempty"`
	Org      string `json:"org,omitempty"`
	Account  string `json:"account,omitempty"`
}

// check is the request's shape: the action known, its required fields
// there, every field within bounds.
func (r adminRequest) check() error {
	if _, ok := adminActions[r.Action]; !ok || r.Action == "connect-public-key" {
		return fmt.Errorf("engine admin: unknown action %q", r.Action)
	}
	need := func(v, flagName string) error {
		if v == "" {
			return fmt.Errorf("engine admin %s: -%s is required", r.Action, flagName)
		}
		return nil
	}
	var errs []error
	if r.Action == "release-hold" && r.Email == "" {
		// optional: the hold is released by the host's operator
	} else if err := need(r.Email, "email"); err != nil {
		errs = append(errs, err)
	} else if err := commands.Email("email", r.Email); err != nil {
		errs = append(errs, fmt.Errorf("engine admin: %w", err))
	}
	switch r.Action {
	case "create-user":
		if err := tenantcmd.Password("password", r.Password); err != nil {
			errs = append(errs, fmt.Errorf("engine admin: %w", err))
		}
	case "grant-operator":
		errs = append(errs, need(r.Venue, "venue"))
	case "issue-partner-key":
		errs = append(errs, need(r.Firm, "firm"))
	case "create-venue":
		errs = append(errs, need(r.Org, "org"))
	case "release-hold":
		errs = append(errs, need(r.Account, "account"))
	}
	for _, v := range []string{r.Venue, r.Scopes, r.Firm, r.Name, r.Org, r.Account} {
		if len(v) > 256 {
			errs = append(errs, fmt.Errorf("engine admin %s: a value of %d bytes (256 at most)", r.Action, len(v)))
			break
		}
	}
	return errors.Join(errs...)
}

// adminOffline runs req on an engine of its own, started on the log with
// read models in memory (no engine may hold the embedded log meanwhile).
func adminOffline(ctx context.Context, cfg Config, req adminRequest) (map[string]any, error) {
	a, err := Start(ctx, cfg, Options{})
	if err != nil {
		return nil, err
	}
	defer a.Close()
	return adminDo(ctx, a.Deps, req)
}

// adminDo runs a checked request on the engine behind d.
func adminDo(ctx context.Context, d *api.Deps, req adminRequest) (map[string]any, error) {
	if err := req.check(); err != nil {
		return nil, err
	}
	action := req.Action
	sys := events.Principal{System: "admin"}
	uid := tenantcmd.UserID(req.Email)
	exec := func(id string, cmd commands.Command) error {
		res, err := d.Engine.Tenant(ctx, id, d.Engine.Envelope(sys, "", cmd))
		if err != nil {
			return err
		}
		return d.Settle(ctx, res)
	}
	result := map[string]any{"action": action, "userId": uid, "email": tenantcmd.NormalEmail(req.Email)}
	switch action {
	case "create-user":
		if err := exec(uid, &tenantcmd.SignUp{Email: req.Email, PasswordHash: identity.HashPassword(identity.Argon2, req.Password),
			VerifyDigest: auth.Digest(ulid.Make().String()), VerifyUntil: time.Now().Add(time.Hour)}); err != nil {
			return nil, err
		}
		if req.Verified {
			if err := exec(uid, &tenantcmd.MarkVerified{}); err != nil {
				return nil, err
			}
		}
	case "verify":
		if err := exec(uid, &tenantcmd.MarkVerified{}); err != nil {
			return nil, err
		}
	case "grant-operator":
		var sc []string
		for _, s := range strings.Split(req.Scopes, ",") {
			if s = strings.TrimSpace(s); s != "" {
				sc = append(sc, s)
			}
		}
		if err := exec(uid, &tenantcmd.GrantOperator{VenueID: req.Venue, Scopes: sc}); err != nil {
			return nil, err
		}
		result["venueId"], result["scopes"] = req.Venue, sc
	case "issue-partner-key":
		firmID := "firm_" + tenantcmd.UserID(req.Firm)[4:]
		if err := exec(firmID, &tenantcmd.CreateTenant{Name: req.Firm, Kind: "firm", Email: req.Email}); err != nil {
			return nil, err
		}
		secret := auth.NewKey("svc_sk_")
		if err := exec(firmID, &tenantcmd.IssueKey{KeyID: "key_" + ulid.Make().String(), Digest: auth.Digest(secret), Kind: "partner", Prefix: secret[:11], Name: "partner"}); err != nil {
			return nil, err
		}
		result["firmId"], result["partnerKey"] = firmID, secret
		delete(result, "userId")
	case "create-venue":
		m, err := projections.GetInto[projections.OrgMember](ctx, d.Store, projections.CollOrgMember, req.Org+"/"+uid)
		if err != nil || m.Role != "owner" {
			return nil, fmt.Errorf("engine admin create-venue: %s is not an owner of organization %s", req.Email, req.Org)
		}
		sum := sha256.Sum256([]byte("admin\x00" + req.Org + "\x00" + req.Name))
		firmID := "firm_" + hex.EncodeToString(sum[:12])
		if err := exec(firmID, &tenantcmd.CreateTenant{Name: req.Name, Kind: "firm"}); err != nil {
			return nil, err
		}
		venueID := evfirm.VenueID(firmID)
		env := d.Engine.Envelope(sys, "admin-venue-"+firmID, &venuecmd.CreateVenue{OrgID: req.Org, Name: req.Name, FirmTenantID: firmID,
			By: venuecmd.Owner{UserID: uid, Verified: true, Owner: true}})
		env.Digest = env.Key
		res, err := d.Engine.Venue(ctx, venueID, env)
		var replay *commands.Replay
		if err != nil && !errors.As(err, &replay) {
			return nil, err
		}
		if err == nil {
			if err := d.Settle(ctx, res); err != nil {
				return nil, err
			}
		}
		result["venueId"], result["orgId"] = venueID, req.Org
	case "release-hold":
		return releaseHold(ctx, d, req)
	case "issue-key":
		secret := auth.NewKey("svc_sk_")
		if err := exec(uid, &tenantcmd.IssueKey{KeyID: "key_" + ulid.Make().String(), Digest: auth.Digest(secret), Kind: "trading", Prefix: secret[:11], Name: req.Name}); err != nil {
			return nil, err
		}
		result["tradingKey"] = secret
	}
	return result, nil
}

func isBool(fs *flag.FlagSet, name string) bool {
	f := fs.Lookup(name)
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// releaseHold lifts the account's reconciliation hold, as a venue operator's
// DELETE .../reconciliation-hold does for a venue's accounts: the door of
// the engine's own operator for an account no venue reaches (a trader's own
// linked provider account). The release is recorded with who released it
// (the -email given, else "admin"); it prints whether a hold was on.
// Idempotent: an account not held is answered released false.
func releaseHold(ctx context.Context, d *api.Deps, req adminRequest) (map[string]any, error) {
	by := "admin"
	if req.Email != "" {
		by = tenantcmd.NormalEmail(req.Email)
	}
	res, err := d.Engine.Account(ctx, req.Account, d.Engine.Envelope(events.Principal{System: "admin"}, "", &firmcmd.ReleaseReconciliation{By: by}))
	if err != nil {
		return nil, fmt.Errorf("engine admin release-hold %s: %w", req.Account, err)
	}
	if err := d.Settle(ctx, res); err != nil {
		return nil, err
	}
	return map[string]any{"action": req.Action, "accountId": req.Account, "by": by, "released": len(res.Events) > 0,
		"reconciliationHold": false}, nil
}
