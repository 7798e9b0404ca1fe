package firm

import "github.com/svc/engine/events"

// Registry lists the firm and webhook event types.
func Registry() events.Registry {
	return events.Registry{
		WebhookRegistered{}.Type():     events.Of[WebhookRegistered](),
		WebhookRemoved{}.Type():        events.Of[WebhookRemoved](),
		RegistrationCreated{}.Type():   events.Of[RegistrationCreated](),
		RegistrationRefreshed{}.Type(): events.Of[RegistrationRefreshed](),
		RegistrationRevoked{}.Type():   events.Of[RegistrationRevoked](),
		RegistrationLinked{}.Type():    events.Of[RegistrationLinked](),
		DeliveryAttempted{}.Type():     events.Of[DeliveryAttempted](),
		DeliveryStarted{}.Type():       events.Of[DeliveryStarted](),
	}
}
