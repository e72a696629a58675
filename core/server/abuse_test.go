package server_test

import (
	"encoding/json"
	"runtime"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/testnet"
)

// TestCompressedBodyRefused: a gzipped multipart form is refused unread,
// not inflated: 300 KiB on the wire would be 256 MiB of form in memory.
func TestCompressedBodyRefused(t *testing.T) {
	c := startCore(t, nil)
	gz, contentType := testnet.GzipForm("image", 256<<20)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, path := range []string{"/v2/verify/bank", "/v2/verify/wallet"} {
		c.do(t, call{method: "POST", path: path, branch: "br-main", body: gz, contentType: contentType,
			header: []string{"Content-Encoding", "gzip"}}).v2err(t, 400, "VALIDATION_ERROR")
	}
	c.do(t, call{method: "POST", path: "/verify", branch: "br-main", body: gz, contentType: contentType,
		header: []string{"Content-Encoding", "gzip"}}).v1err(t, 400, "invalid_request")
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Errorf("core allocated %d MiB answering three compressed requests", grew>>20)
	}
}

// TestReadingABranchAnnouncesNothing: only changes reach the edges on
// slip.config (each announcement drops every edge's auth cache); reading a
// branch is not one.
func TestReadingABranchAnnouncesNothing(t *testing.T) {
	c := startCore(t, nil)
	b2b := func(service string) []string {
		return []string{api.HeaderB2BClient, "client-0", api.HeaderService, service}
	}
	announced := func(service string) int { // config changes announced for service
		msgs, err := c.store.Outbox(1000)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, m := range msgs {
			var e api.ConfigEvent
			if m.Topic == api.TopicConfig && json.Unmarshal(m.Value, &e) == nil && e.ServiceID == service {
				n++
			}
		}
		return n
	}
	seeded, seededExp := announced("svc"), announced("svc-expired") // the seed's records, announced as they were created
	if a := c.do(t, call{method: "GET", path: "/b2b/branches/br-main", header: b2b("svc")}); a.status != 200 {
		t.Fatalf("GET branch: %d %s", a.status, a.raw)
	}
	// A change at another service after the read: announcements are
	// committed in order, so once the change's is there, a read's would be.
	if a := c.do(t, call{method: "PATCH", path: "/b2b/branches/br-exp", body: map[string]any{"name": "Renamed"},
		contentType: "application/json", header: b2b("svc-expired")}); a.status != 200 {
		t.Fatalf("PATCH branch: %d %s", a.status, a.raw)
	}
	testnet.Eventually(t, 10*time.Second, func() bool { return announced("svc-expired") == seededExp+1 },
		func() string { return "the change was not announced" })
	if n := announced("svc") - seeded; n != 0 {
		t.Fatalf("reading a branch announced %d config changes", n)
	}
}
