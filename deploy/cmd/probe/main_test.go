package main

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

func TestProbe(t *testing.T) {
	var status atomic.Int64 // 0: never answer
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			http.NotFound(w, r)
			return
		}
		if status.Load() == 0 {
			<-r.Context().Done() // until the probe gives up
			return
		}
		w.WriteHeader(int(status.Load()))
	}))
	defer srv.Close()
	f := func(status0 int, args []string, ok bool) {
		t.Helper()
		status.Store(int64(status0))
		if err := run(args); (err == nil) != ok {
			t.Errorf("%d %v: err %v, want ok=%v", status0, args, err, ok)
		}
	}
	f(200, []string{srv.URL + "/health"}, true)
	f(204, []string{srv.URL + "/health"}, true)
	f(503, []string{srv.URL + "/health"}, false)
	f(200, []string{srv.URL + "/nope"}, false)
	f(0, []string{"-timeout", "100ms", srv.URL + "/health"}, false) // no answer in time
	f(200, []string{}, false)
	srv.Close()
	f(200, []string{srv.URL + "/health"}, false) // refused
}
