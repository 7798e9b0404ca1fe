package app

import (
	"context"
	"fmt"

	challengecmd "github.com/svc/engine/commands/challenge"
	"github.com/svc/engine/events"
	evch "github.com/svc/engine/events/challenge"
	evfirm "github.com/svc/engine/events/firm"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/challenges"
)

// challengesArea is the challenge area's configuration: nil (every route
// 404) unless CHALLENGES_ENABLED.
func challengesArea(cfg Config) *challenges.Config {
	if !cfg.Challenges {
		return nil
	}
	return &challenges.Config{}
}

// Sample programs the sandbox ships with CHALLENGES_ENABLED: a two-stage
// chain whose first stage is free, and a priced single stage (which this
// deployment answers 402 for: it collects no fee).
const (
	SampleStage1 = "5e1d0c6a-0001-4c00-8000-000000000001"
	SampleStage2 = "5e1d0c6a-0002-4c00-8000-000000000002"
	SamplePriced = "5e1d0c6a-0003-4c00-8000-000000000003"
)

// SamplePrograms are the sandbox's sample programs.
func SamplePrograms() []evch.Program {
	d := events.MustDecimal
	sizes := []events.Decimal{d("10000"), d("25000"), d("50000")}
	share := d("80")
	return []evch.Program{
		{ID: SampleStage1, Name: "Sample evaluation, stage 1", Description: "Free first stage: reach a 10% profit over at least 3 trading days within 30 days; 5% daily and 10% trailing drawdown.",
			IsActive: true, Stage: 1, NextChallengeID: SampleStage2, AllowedTypes: []string{"standard"}, AccountSizes: sizes, Currency: "USD",
			ProfitTargetPct: d("10"), MaxDailyDdPct: d("5"), MaxTotalDdPct: d("10"), DDMode: evch.DDTrailingEOD,
			MinTradingDays: 3, MaxDurationDays: 30, AllowWeekendHold: false},
		{ID: SampleStage2, Name: "Sample evaluation, stage 2", Description: "Verification: reach a 5% profit over at least 3 trading days within 60 days; same drawdown limits.",
			IsActive: true, Stage: 2, AllowedTypes: []string{"standard"}, AccountSizes: sizes, Currency: "USD",
			ProfitTargetPct: d("5"), MaxDailyDdPct: d("5"), MaxTotalDdPct: d("10"), DDMode: evch.DDTrailingEOD,
			MinTradingDays: 3, MaxDurationDays: 60, AllowWeekendHold: false, ProfitSharePct: &share},
		{ID: SamplePriced, Name: "Sample one-step evaluation", Description: "A priced single stage: 8% profit, 4% daily and 6% static drawdown, weekend holds allowed.",
			IsActive: true, Stage: 1, AllowedTypes: []string{"standard"}, AccountSizes: sizes, Currency: "USD", PriceCents: 9900,
			ProfitTargetPct: d("8"), MaxDailyDdPct: d("4"), MaxTotalDdPct: d("6"), DDMode: evch.DDStatic, AllowWeekendHold: true, ProfitSharePct: &share},
	}
}

// bootstrapChallenges publishes the sample programs for the demo venue, each
// under a fixed key: a later start replays the first answer and records nothing.
func bootstrapChallenges(ctx context.Context, d *api.Deps, cfg Config) error {
	if !cfg.Challenges {
		return nil
	}
	sys, settle := events.Principal{System: "bootstrap"}, settleOnce(ctx, d)
	for _, p := range SamplePrograms() {
		env := keyedEnvelope(d, sys, "bootstrap-challenge-"+p.ID, &challengecmd.PublishProgram{Program: p, VenueID: evfirm.VenueID(DemoFirm), By: "bootstrap"})
		if err := settle(d.Engine.PublishProgram(ctx, p.ID, env)); err != nil {
			return fmt.Errorf("sample program %s: %w", p.ID, err)
		}
	}
	return nil
}
