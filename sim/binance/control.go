package binance

import "net/http"

func (s *Sim) serveControl(w http.ResponseWriter, r *http.Request) {
	http.NotFound(w, r)
}
