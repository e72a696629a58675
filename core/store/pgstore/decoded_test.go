package pgstore

import (
	"encoding/json"
	"testing"

	"github.com/slipverify/slipverify/core/store"
)

// TestDecoded: a document decodes to its record, the same the second time
// it is read; a changed document decodes anew; none is ErrNotFound.
func TestDecoded(t *testing.T) {
	var d decoded[store.Branch]
	limit := int64(5)
	raw, _ := json.Marshal(store.Branch{ID: "br", ServiceID: "svc", LimitQuota: &limit})
	for range 2 {
		var br store.Branch
		if err := d.into(raw, &br); err != nil || br.ID != "br" || br.LimitQuota == nil || *br.LimitQuota != 5 {
			t.Fatalf("%+v, %v", br, err)
		}
	}
	changed, _ := json.Marshal(store.Branch{ID: "br", ServiceID: "svc"})
	var br store.Branch
	if err := d.into(changed, &br); err != nil || br.LimitQuota != nil {
		t.Errorf("the changed document: %+v, %v; want no limit", br, err)
	}
	if err := d.into(nil, &br); err != store.ErrNotFound {
		t.Errorf("no document: %v, want ErrNotFound", err)
	}
}

// BenchmarkDecoded: a branch's document decoded each time, and kept.
func BenchmarkDecoded(b *testing.B) {
	limit := int64(5)
	url := "https://shop.example/hook"
	raw, _ := json.Marshal(store.Branch{ID: "bench-1-br01", ServiceID: "bench-1", Name: "Branch 1", Active: true,
		IPAllow: []string{"10.0.0.0/8"}, LimitQuota: &limit, WebhookURL: &url, KeyDigest: store.Digest("k")})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var br store.Branch
			if err := jsonInto(raw, &br); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("kept", func(b *testing.B) {
		var d decoded[store.Branch]
		b.ReportAllocs()
		for b.Loop() {
			var br store.Branch
			if err := d.into(raw, &br); err != nil {
				b.Fatal(err)
			}
		}
	})
}
