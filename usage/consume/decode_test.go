package consume

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/usage/chstore"
	"github.com/slipverify/slipverify/usage/ledgertest"
)

// reference is what the consumer made of a message before the fast path:
// encoding/json, then the ledger's checks.
func reference(value []byte) (chstore.Rows, string) {
	var rows chstore.Rows
	var e api.UsageEvent
	if err := json.Unmarshal(value, &e); err != nil {
		return rows, fmt.Errorf("not a usage event: %w", err).Error()
	}
	if err := rows.Append(&e); err != nil {
		return rows, err.Error()
	}
	return rows, ""
}

// decodeSeeds are messages in core's shape and near it: every way the fast
// path must decline, and every way the checks refuse an event.
var decodeSeeds = []string{
	`{"eventId":"3f1c2a4e-9b7d-4c1e-8a2b-0d9e8f7a6b5c","occurredAt":"2026-11-22T10:00:00.123456789Z","serviceId":"svc-a","branchId":"br-1","kind":"bank","api":"v2","mode":"sync","outcome":"success","billable":true}`,
	`{"eventId":"3F1C2A4E-9B7D-4C1E-8A2B-0D9E8F7A6B5C","occurredAt":"2026-11-22T10:00:00Z","serviceId":"svc-a","branchId":"br-1","kind":"wallet","api":"v1","mode":"async","outcome":"SLIP_NOT_FOUND","billable":false,"jobId":"job-1"}`,
	` { "eventId" : "3f1c2a4e-9b7d-4c1e-8a2b-0d9e8f7a6b5c" ,"occurredAt":"2026-11-22T10:00:00.5Z",` + "\n\t" + `"serviceId":"svc-a","branchId":"br-1","kind":"bank","api":"v2","mode":"sync","outcome":"success","billable":true } `,
	`{"EVENTID":"3f1c2a4e-9b7d-4c1e-8a2b-0d9e8f7a6b5c","occurredAt":"2026-11-22T10:00:00Z","serviceId":"svc-a","branchId":"br-1","kind":"bank","api":"v2","mode":"sync","outcome":"success","billable":true}`,
	`{"eventId":"3f1c2a4e-9b7d-4c1e-8a2b-0d9e8f7a6b5c","eventId":"0f1c2a4e-9b7d-4c1e-8a2b-0d9e8f7a6b5c","occurredAt":"2026-11-22T10:00:00Z","serviceId":"svc-a","branchId":"br-1","kind":"bank","api":"v2","mode":"sync","outcome":"success","billable":true}`,
	`{"eventId":"3f1c2a4e-9b7d-4c1e-8a2b-0d9e8f7a6b5c","occurredAt":"2026-11-22T17:00:00+07:00","serviceId":"svc-a","branchId":"br-1","kind":"bank","api":"v2","mode":"sync","outcome":"success","billable":true}`,
	`{"eventId":"3f1c2a4e-9b7d-4c1e-8a2b-0d9e8f7a6b5c","occurredAt":"2026-02-30T10:00:00Z","serviceId":"svc-a","branchId":"br-1","kind":"bank","api":"v2","mode":"sync","outcome":"success","billable":true}`,
	`{"eventId":"3f1c2a4e-9b7d-4c1e-8a2b-0d9e8f7a6b5c","occurredAt":"2026-11-22T24:00:60Z","serviceId":"svc-a","branchId":"br-1","kind":"bank","api":"v2","mode":"sync","outcome":"success","billable":true}`,
	`{"eventId":"3f1c2a4e-9b7d-4c1e-8a2b-0d9e8f7a6b5c","occurredAt":"2026-11-22T10:00:00.1234567891Z","serviceId":"svc-a","branchId":"br-1","kind":"bank","api":"v2","mode":"sync","outcome":"success","billable":true}`,
	`{"eventId":"3f1c2a4e-9b7d-4c1e-8a2b-0d9e8f7a6b5c","occurredAt":"1999-12-31T23:59:59Z","serviceId":"svc-\u0061","branchId":"สาขา","kind":"bank","api":"v2","mode":"sync","outcome":"success","billable":true}`,
	`{"eventId":"3f1c2a4e-9b7d-4c1e-8a2b-0d9e8f7a6b5c","occurredAt":null,"serviceId":"svc-a","branchId":"br-1","kind":"bank","api":"v2","mode":"sync","outcome":"success","billable":1,"extra":[1,{"a":2}]}`,
	`{"eventId":"nope","kind":"fax"}`,
	`{"eventId":"3f1c2a4e-9b7d-4c1e-8a2b-0d9e8f7a6b5c","occurredAt":"2026-11-22T10:00:00Z"}`,
	`{"eventId":"3f1c2a4e-9b7d-4c1e-8a2b-0d9e8f7a6b5c","occurredAt":"2026-11-22T10:00:00Z","serviceId":"svc-a","branchId":"br-1","kind":"bank","api":"v2","mode":"sync","outcome":"success","billable":true}x`,
	`{"eventId":"3f1c2a4e-9b7d-4c1e-8a2b-0d9e8f7a6b5c","occurredAt":"2026-11-22T10:00:00Z","billable":truex}`,
	`{"eventId":"3f1c2a4e-9b7d-4c1e-8a2b-0d9e8f7a6b5c",}`,
	`{"eventId":"3f1c2a4e-9b7d-4c1e-8a2b-0d9e8f7a6b5c","occurredAt":"2026-11-22T10:00:00Z","serviceId":"svc-a","branchId":"br-1","kind":"bank","api":"v2","mode":"async","outcome":"success","billable":true,"amount":150075,"sendingBank":"004","jobId":"job-1"}`,
	`{"eventId":"3f1c2a4e-9b7d-4c1e-8a2b-0d9e8f7a6b5c","occurredAt":"2026-11-22T10:00:00Z","serviceId":"svc-a","branchId":"br-1","kind":"wallet","api":"v2","mode":"sync","outcome":"success","billable":true,"amount":0}`,
	`{"eventId":"3f1c2a4e-9b7d-4c1e-8a2b-0d9e8f7a6b5c","occurredAt":"2026-11-22T10:00:00Z","serviceId":"svc-a","branchId":"br-1","kind":"bank","api":"v2","mode":"sync","outcome":"success","billable":true,"amount":999999999999999999,"sendingBank":"014"}`,
	`{"eventId":"3f1c2a4e-9b7d-4c1e-8a2b-0d9e8f7a6b5c","occurredAt":"2026-11-22T10:00:00Z","serviceId":"svc-a","branchId":"br-1","kind":"bank","api":"v2","mode":"sync","outcome":"success","billable":true,"amount":9223372036854775807}`,
	`{"eventId":"3f1c2a4e-9b7d-4c1e-8a2b-0d9e8f7a6b5c","occurredAt":"2026-11-22T10:00:00Z","serviceId":"svc-a","branchId":"br-1","kind":"bank","api":"v2","mode":"sync","outcome":"success","billable":true,"amount":9223372036854775808}`,
	`{"eventId":"3f1c2a4e-9b7d-4c1e-8a2b-0d9e8f7a6b5c","occurredAt":"2026-11-22T10:00:00Z","serviceId":"svc-a","branchId":"br-1","kind":"bank","api":"v2","mode":"sync","outcome":"success","billable":true,"amount":-150075}`,
	`{"eventId":"3f1c2a4e-9b7d-4c1e-8a2b-0d9e8f7a6b5c","occurredAt":"2026-11-22T10:00:00Z","serviceId":"svc-a","branchId":"br-1","kind":"bank","api":"v2","mode":"sync","outcome":"success","billable":true,"amount":1500.75}`,
	`{"eventId":"3f1c2a4e-9b7d-4c1e-8a2b-0d9e8f7a6b5c","occurredAt":"2026-11-22T10:00:00Z","serviceId":"svc-a","branchId":"br-1","kind":"bank","api":"v2","mode":"sync","outcome":"success","billable":true,"amount":15e3}`,
	`{"eventId":"3f1c2a4e-9b7d-4c1e-8a2b-0d9e8f7a6b5c","occurredAt":"2026-11-22T10:00:00Z","serviceId":"svc-a","branchId":"br-1","kind":"bank","api":"v2","mode":"sync","outcome":"success","billable":true,"amount":0150}`,
	`{"eventId":"3f1c2a4e-9b7d-4c1e-8a2b-0d9e8f7a6b5c","occurredAt":"2026-11-22T10:00:00Z","serviceId":"svc-a","branchId":"br-1","kind":"bank","api":"v2","mode":"sync","outcome":"success","billable":true,"amount":"150","sendingBank":4}`,
	`{"eventId":"3f1c2a4e-9b7d-4c1e-8a2b-0d9e8f7a6b5c","occurredAt":"2026-11-22T10:00:00Z","serviceId":"svc-a","branchId":"br-1","kind":"bank","api":"v2","mode":"sync","outcome":"success","billable":true,"amount":150,"amount":250,"sendingBank":"\u0030\u0030\u0034"}`,
	`{"eventId":"3f1c2a4e-9b7d-4c1e-8a2b-0d9e8f7a6b5c","occurredAt":"2026-11-22T10:00:00Z","serviceId":"svc-a","branchId":"br-1","kind":"bank","api":"v2","mode":"sync","outcome":"success","billable":true,"amount":null,"sendingBank":"` + strings.Repeat("0", 129) + `"}`,
	`{}`, `{`, `[]`, `null`, `""`, ``,
}

// sameAsReference checks that d decodes value to the rows, or fails with
// the error, that encoding/json and the checks give.
func sameAsReference(t *testing.T, d *Decoder, value []byte) {
	t.Helper()
	wantRows, wantErr := reference(value)
	var rows chstore.Rows
	gotErr := ""
	if err := d.Decode(value, &rows); err != nil {
		gotErr = err.Error()
	}
	if gotErr != wantErr || !reflect.DeepEqual(rows, wantRows) {
		t.Errorf("%q:\n got %+v %q\nwant %+v %q", value, rows, gotErr, wantRows, wantErr)
	}
}

// TestDecodeAsEncodingJSON: every message decodes as encoding/json and the
// checks would, whichever path it takes.
func TestDecodeAsEncodingJSON(t *testing.T) {
	var d Decoder
	for _, s := range decodeSeeds {
		sameAsReference(t, &d, []byte(s))
	}
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for i := range 200 {
		v, _ := json.Marshal(ledgertest.Event(i, "svc-a", "br-1", at.Add(time.Duration(i)*time.Millisecond*1001)))
		sameAsReference(t, &d, v)
	}
}

// FuzzDecode: the fast path never disagrees with encoding/json.
func FuzzDecode(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, value []byte) {
		var d Decoder
		sameAsReference(t, &d, value)
	})
}

// TestDecodeAllocations: an event as core writes it costs one allocation
// (its event id) once its strings have been seen.
func TestDecodeAllocations(t *testing.T) {
	value, _ := json.Marshal(ledgertest.Event(1, "svc-demo", "br-main", time.Now().UTC()))
	var d Decoder
	rows := chstore.Rows{}
	for range 2 {
		if err := d.Decode(value, &rows); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(1000, func() {
		rows.Reset()
		d.Decode(value, &rows)
	})
	if allocs > 1 {
		t.Errorf("%.1f allocations per event, want at most 1", allocs)
	}
}
