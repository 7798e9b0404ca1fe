package challenge

import (
	"encoding/json"
	"time"

	"github.com/svc/engine/events"
	evch "github.com/svc/engine/events/challenge"
)

// num renders a decimal as a JSON number.
func num(d events.Decimal) json.Number { return json.Number(d.String()) }

// View is a program as the API renders it: exactly the spec's challenge
// program fields, numbers as JSON numbers.
func View(p evch.Program) map[string]any {
	sizes := make([]json.Number, 0, len(p.AccountSizes))
	for _, s := range p.AccountSizes {
		sizes = append(sizes, num(s))
	}
	types := append([]string{}, p.AllowedTypes...)
	v := map[string]any{
		"id": p.ID, "name": p.Name, "description": p.Description, "isActive": p.IsActive, "stage": p.Stage,
		"nextChallengeId": nil, "allowedTypes": types, "accountSizes": sizes, "currency": p.Currency,
		"priceCents": p.PriceCents, "profitTargetPct": num(p.ProfitTargetPct), "maxDailyDdPct": num(p.MaxDailyDdPct),
		"maxTotalDdPct": num(p.MaxTotalDdPct), "ddMode": p.DDMode, "minTradingDays": p.MinTradingDays,
		"maxDurationDays": nil, "allowWeekendHold": p.AllowWeekendHold, "profitSharePct": nil,
	}
	if p.NextChallengeID != "" {
		v["nextChallengeId"] = p.NextChallengeID
	}
	if p.MaxDurationDays > 0 {
		v["maxDurationDays"] = p.MaxDurationDays
	}
	if p.ProfitSharePct != nil {
		v["profitSharePct"] = num(*p.ProfitSharePct)
	}
	return v
}

// EnrollmentView is an enrollment as the enroll answer renders it.
func EnrollmentView(id, challengeID string, stage int64, accountID string, size events.Decimal, typ, currency, status string, at time.Time) map[string]any {
	return map[string]any{"id": id, "challengeId": challengeID, "stage": stage, "accountId": accountID,
		"accountSize": num(size), "accountType": typ, "currency": currency, "status": status, "createdAt": at.UTC().Format(time.RFC3339)}
}

// Rules are the evaluation rules of an enrollment in program p at size, in calendar cal.
func Rules(enrollmentID string, p evch.Program, size events.Decimal, cal string) evch.Rules {
	return evch.Rules{EnrollmentID: enrollmentID, ChallengeID: p.ID, Stage: p.Stage, NextChallengeID: p.NextChallengeID, Size: size,
		ProfitTargetPct: p.ProfitTargetPct, MaxDailyDdPct: p.MaxDailyDdPct, MaxTotalDdPct: p.MaxTotalDdPct, DDMode: p.DDMode,
		MinTradingDays: p.MinTradingDays, MaxDurationDays: p.MaxDurationDays, AllowWeekendHold: p.AllowWeekendHold, Calendar: cal}
}
