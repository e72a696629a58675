package scenario

import (
	"context"
	"encoding/json"

	"github.com/slipverify/slipverify/bench/load"
	"github.com/slipverify/slipverify/bench/tenant"
)

// submitted is the data of an async submit's 202 answer: jobId for one
// slip, the jobs of a batch in item order.
type submitted struct {
	Data struct {
		JobID  string   `json:"jobId"`
		JobIDs []string `json:"jobIds"`
		Jobs   []struct {
			JobID string `json:"jobId"`
		} `json:"jobs"`
	} `json:"data"`
}

func (s *submitted) ids() []string {
	out := s.Data.JobIDs
	for _, j := range s.Data.Jobs {
		out = append(out, j.JobID)
	}
	if s.Data.JobID != "" && len(out) == 0 {
		out = append(out, s.Data.JobID)
	}
	return out
}

func batchSize(env *Env) int {
	if env.BatchSize <= 0 {
		return 20
	}
	return min(env.BatchSize, 100)
}

// asyncSubmit returns a Func that POSTs body(seq) to path and registers the
// jobs of its 202 answer (want of them) with the webhook receiver, due when
// the submit was due.
func asyncSubmit(env *Env, path string, want int, body func(dst []byte, seq uint64) []byte) (load.Func, error) {
	bs, err := benchBranches(env, "")
	if err != nil {
		return nil, err
	}
	return bearerJSON(env, bs, path, body, func(r load.Request, b *tenant.Branch) func(Answer) string {
		return func(a Answer) string {
			if a.Status != 202 {
				return ""
			}
			var s submitted
			if json.Unmarshal(a.Body, &s) != nil {
				return "202 unreadable body"
			}
			ids := s.ids()
			if len(ids) != want {
				return "202 without its job ids"
			}
			for _, id := range ids {
				env.Webhook.Expect(id, r.Due, b.WebhookSecret)
			}
			return ""
		}
	}), nil
}

// appendItem appends one v2 bank body of a fresh slip.
func appendItem(dst []byte, run string, kind byte, n uint64) []byte {
	return appendPayloadBody(dst, bankPayload(run, kind, n))
}

func asyncSingle(_ context.Context, env *Env) (load.Func, error) {
	url := env.Webhook.URL
	return asyncSubmit(env, "/v2/verify/bank/async", 1, func(dst []byte, seq uint64) []byte {
		dst = appendItem(dst, env.Run, 'A', seq)
		dst = dst[:len(dst)-1] // reopen the object for callbackUrl
		dst = append(dst, `,"callbackUrl":"`...)
		dst = append(dst, url...)
		return append(dst, `"}`...)
	})
}

func asyncBatch(_ context.Context, env *Env) (load.Func, error) {
	n := batchSize(env)
	url := env.Webhook.URL
	return asyncSubmit(env, "/v2/verify/bank/async/batch", n, func(dst []byte, seq uint64) []byte {
		dst = append(dst, `{"items":[`...)
		for i := range uint64(n) {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendItem(dst, env.Run, 'Q', seq*uint64(n)+i)
		}
		dst = append(dst, `],"callbackUrl":"`...)
		dst = append(dst, url...)
		return append(dst, `"}`...)
	})
}
