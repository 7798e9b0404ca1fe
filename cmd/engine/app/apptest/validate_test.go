package apptest_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/svc/engine/cmd/engine/app/apptest"
)

// recorder is a testing.TB that keeps what ValidateResponse reports.
type recorder struct {
	testing.TB
	failed []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(f string, args ...any) {
	r.failed = append(r.failed, fmt.Sprintf(f, args...))
}
func (r *recorder) Fatalf(f string, args ...any) { r.TB.Fatalf(f, args...) }

// The suite's schema check refuses a null where the document says array, and
// passes the empty array.
func TestValidateResponseRefusesNullForAnArray(t *testing.T) {
	req := httptest.NewRequest(http.MethodGet, "/api/venues/231164a5-0d95-5ee5-80b9-298690d52620/groups", nil)
	h := http.Header{"Content-Type": []string{"application/json"}}
	for body, wantFail := range map[string]bool{`{"items":null}`: true, `{"items":[]}`: false} {
		r := &recorder{TB: t}
		apptest.ValidateResponse(r, req, http.StatusOK, h, []byte(body))
		if (len(r.failed) > 0) != wantFail {
			t.Errorf("%s: reported %q, want a failure: %v", body, r.failed, wantFail)
		}
	}
}
