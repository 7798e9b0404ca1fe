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
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	tenantcmd "github.com/svc/engine/commands/tenant"
	venuecmd "github.com/svc/engine/commands/venue"
	"github.com/svc/engine/events"
	evfirm "github.com/svc/engine/events/firm"
	"github.com/svc/engine/gateway/auth"
	"github.com/svc/engine/gateway/connect/statement"
	"github.com/svc/engine/gateway/identity"
	"github.com/svc/engine/projections"
)

// Admin is `engine admin <action> [flags]`: the operator's way into a
// production engine that has no user yet. Each action writes through the same
// commands as the API, to the log the engine's settings name (NATS_URL, or
// the embedded files under ENGINE_DATA_DIR, which the running engine must
// release first), and prints one JSON line; a secret is printed that once and
// stored only as a digest. Read models are rebuilt in memory from the log for
// the run, never written to PostgreSQL.
//
//	engine admin create-user -email E [-verified] [-password-stdin]
//	engine admin verify -email E
//	engine admin grant-operator -email E -venue V [-scopes account:read,account:write]
//	engine admin issue-partner-key -firm NAME -email E
//	engine admin issue-key -email E [-name N]
//	engine admin create-venue -email OWNER -org ORG -name NAME
//	engine admin connect-public-key    (production's statement key, for the sandbox's ENGINE_CONNECT_PRODUCTION_KEY)
func Admin(ctx context.Context, args []string, getenv func(string) string, out, errOut io.Writer) error {
	usage := func() {
		fmt.Fprintln(errOut, "Usage: engine admin create-user|verify|grant-operator|issue-partner-key|issue-key|create-venue|connect-public-key [flags] [engine flags]")
	}
	if len(args) == 0 {
		usage()
		return errors.New("engine admin: an action is required")
	}
	action := args[0]
	fs := flag.NewFlagSet("engine admin "+action, flag.ContinueOnError)
	fs.SetOutput(errOut)
	email := fs.String("email", "", "the user's email address")
	verified := fs.Bool("verified", false, "create-user: mark the email verified")
	stdin := fs.Bool("password-stdin", false, "create-user: read the password from the first line of standard input; otherwise one is made and printed")
	venue := fs.String("venue", "", "grant-operator: the venue id")
	scopes := fs.String("scopes", "account:read,account:write", "grant-operator: comma-separated scopes; empty revokes the grant")
	firm := fs.String("firm", "", "issue-partner-key: the firm's name")
	name := fs.String("name", "admin", "issue-key: the key's name; create-venue: the venue's name")
	org := fs.String("org", "", "create-venue: the organization the venue belongs to (the -email user must own it)")
	// The engine's own settings choose the log: flags that are not the
	// action's go to the engine's configuration.
	var own, engineArgs []string
	for i := 1; i < len(args); i++ {
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
	if *email != "" {
		if err := commands.Email("email", *email); err != nil {
			return fmt.Errorf("engine admin: %w", err)
		}
	}
	need := func(v, flagName string) error {
		if v == "" {
			return fmt.Errorf("engine admin %s: -%s is required", action, flagName)
		}
		return nil
	}
	if err := need(*email, "email"); err != nil {
		return err
	}
	var password string
	if action == "create-user" {
		if *stdin {
			line, err := bufio.NewReader(os.Stdin).ReadString('\n')
			if err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			password = strings.TrimRight(line, "\r\n")
		} else {
			password = auth.NewKey("")[:24]
		}
		if err := tenantcmd.Password("password", password); err != nil {
			return fmt.Errorf("engine admin: %w", err)
		}
	}
	a, err := Start(ctx, cfg, Options{})
	if err != nil {
		return err
	}
	defer a.Close()
	d := a.Deps
	sys := events.Principal{System: "admin"}
	uid := tenantcmd.UserID(*email)
	exec := func(id string, cmd commands.Command) error {
		res, err := d.Engine.Tenant(ctx, id, d.Engine.Envelope(sys, "", cmd))
		if err != nil {
			return err
		}
		return d.Settle(ctx, res)
	}
	result := map[string]any{"action": action, "userId": uid, "email": tenantcmd.NormalEmail(*email)}
	switch action {
	case "create-user":
		if err := exec(uid, &tenantcmd.SignUp{Email: *email, PasswordHash: identity.HashPassword(identity.Argon2, password),
			VerifyDigest: auth.Digest(ulid.Make().String()), VerifyUntil: time.Now().Add(time.Hour)}); err != nil {
			return err
		}
		if *verified {
			if err := exec(uid, &tenantcmd.MarkVerified{}); err != nil {
				return err
			}
		}
		if !*stdin {
			result["password"] = password
		}
	case "verify":
		if err := exec(uid, &tenantcmd.MarkVerified{}); err != nil {
			return err
		}
	case "grant-operator":
		if err := need(*venue, "venue"); err != nil {
			return err
		}
		var sc []string
		for _, s := range strings.Split(*scopes, ",") {
			if s = strings.TrimSpace(s); s != "" {
				sc = append(sc, s)
			}
		}
		if err := exec(uid, &tenantcmd.GrantOperator{VenueID: *venue, Scopes: sc}); err != nil {
			return err
		}
		result["venueId"], result["scopes"] = *venue, sc
	case "issue-partner-key":
		if err := need(*firm, "firm"); err != nil {
			return err
		}
		firmID := "firm_" + tenantcmd.UserID(*firm)[4:]
		if err := exec(firmID, &tenantcmd.CreateTenant{Name: *firm, Kind: "firm", Email: *email}); err != nil {
			return err
		}
		secret := auth.NewKey("svc_sk_")
		if err := exec(firmID, &tenantcmd.IssueKey{KeyID: "key_" + ulid.Make().String(), Digest: auth.Digest(secret), Kind: "partner", Prefix: secret[:11], Name: "partner"}); err != nil {
			return err
		}
		result["firmId"], result["partnerKey"] = firmID, secret
		delete(result, "userId")
	case "create-venue":
		if err := need(*org, "org"); err != nil {
			return err
		}
		m, err := projections.GetInto[projections.OrgMember](ctx, d.Store, projections.CollOrgMember, *org+"/"+uid)
		if err != nil || m.Role != "owner" {
			return fmt.Errorf("engine admin create-venue: %s is not an owner of organization %s", *email, *org)
		}
		sum := sha256.Sum256([]byte("admin\x00" + *org + "\x00" + *name))
		firmID := "firm_" + hex.EncodeToString(sum[:12])
		if err := exec(firmID, &tenantcmd.CreateTenant{Name: *name, Kind: "firm"}); err != nil {
			return err
		}
		venueID := evfirm.VenueID(firmID)
		env := d.Engine.Envelope(sys, "admin-venue-"+firmID, &venuecmd.CreateVenue{OrgID: *org, Name: *name, FirmTenantID: firmID,
			By: venuecmd.Owner{UserID: uid, Verified: true, Owner: true}})
		env.Digest = env.Key
		res, err := d.Engine.Venue(ctx, venueID, env)
		var replay *commands.Replay
		if err != nil && !errors.As(err, &replay) {
			return err
		}
		if err == nil {
			if err := d.Settle(ctx, res); err != nil {
				return err
			}
		}
		result["venueId"], result["orgId"] = venueID, *org
	case "issue-key":
		secret := auth.NewKey("svc_sk_")
		if err := exec(uid, &tenantcmd.IssueKey{KeyID: "key_" + ulid.Make().String(), Digest: auth.Digest(secret), Kind: "trading", Prefix: secret[:11], Name: *name}); err != nil {
			return err
		}
		result["tradingKey"] = secret
	default:
		usage()
		return fmt.Errorf("engine admin: unknown action %q", action)
	}
	return json.NewEncoder(out).Encode(result)
}

func isBool(fs *flag.FlagSet, name string) bool {
	f := fs.Lookup(name)
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
