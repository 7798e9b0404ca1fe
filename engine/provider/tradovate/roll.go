package tradovate

import (
	"context"
	"net/http"

	"github.com/svc/engine/engine/provider"
)

var _ provider.RollSession = (*session)(nil)

// rollAnswer is contract/rollcontract's answer.
type rollAnswer struct {
	Contract  *contract `json:"contract"`
	ErrorText string    `json:"errorText"`
}

// Front implements provider.RollSession: POST /contract/rollcontract with
// the product's name, the API's "best upcoming maturity" of the product
// (a read: it changes nothing, so a 401 sends it again after renewing).
// An errorText, or no contract, is *provider.NotFound.
func (s *session) Front(ctx context.Context, product string) (string, error) {
	var ans rollAnswer
	body := map[string]any{"name": product, "forward": true, "ifExpired": true}
	if err := s.l.call(ctx, request{op: opRead, method: http.MethodPost, path: "/contract/rollcontract", body: body}, &ans); err != nil {
		return "", err
	}
	if ans.ErrorText != "" || ans.Contract == nil || ans.Contract.ID <= 0 || ans.Contract.Name == "" {
		return "", &provider.NotFound{}
	}
	s.p.cat.putContract(*ans.Contract)
	return ans.Contract.Name, nil
}
