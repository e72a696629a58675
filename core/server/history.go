package server

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/csv"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/quota"
	"github.com/slipverify/slipverify/core/server/fields"
	"github.com/slipverify/slipverify/core/slip"
	"github.com/slipverify/slipverify/core/store"
)

// historyRoutes adds the routes that read what a service verified: the
// free re-read of one slip, and the history of a branch (v2) or of every
// branch (/b2b, branch:read).
func (s *Server) historyRoutes(r *router.Router) {
	r.GET("/v2/slips/{ref}", s.guard(api.V2, branch, s.reread))
	r.GET("/v2/verifications", s.guard(api.V2, branch, s.history))
	r.GET("/b2b/verifications", s.guard(api.V2, service, s.history))
	r.GET("/b2b/branches/{branch}/conditions", s.guard(api.V2, service, s.getConditions))
	r.PUT("/b2b/branches/{branch}/conditions", s.guard(api.V2, service, s.putConditions))
}

// Reread is the answer of GET /v2/slips/:transRef: the service's record of
// a slip, as first verified.
type Reread struct {
	TransRef        string          `json:"transRef"`
	Kind            string          `json:"kind"` // bank or wallet
	FirstVerifiedAt string          `json:"firstVerifiedAt"`
	BranchID        string          `json:"branchId"` // the branch that first verified it
	AmountInSlip    float64         `json:"amountInSlip"`
	RawSlip         json.RawMessage `json:"rawSlip"`
}

// reread answers the service's record of a slip, free: no quota, no usage
// event. A reference that is no slip's is SLIP_NOT_FOUND, as one never
// verified.
func (s *Server) reread(ctx *fasthttp.RequestCtx, c caller) (any, error) {
	ref := fields.Param(ctx, "ref")
	if (slip.Bank{BankCode: "000", TransRef: ref}).Validate() != nil {
		return nil, api.E(api.SlipNotFound)
	}
	key, rec, err := s.store.FindSlip(c.serviceID, ref)
	if errors.Is(err, store.ErrNotFound) {
		return nil, api.E(api.SlipNotFound)
	}
	if err != nil {
		return nil, api.Internal(err)
	}
	var amount struct {
		Amount json.RawMessage `json:"amount"` // a bank slip's {amount, local}, a wallet slip's number
	}
	if err := json.Unmarshal(rec.Result, &amount); err != nil {
		return nil, api.Internal(err)
	}
	var a struct {
		Amount float64 `json:"amount"`
	}
	if bytes.HasPrefix(amount.Amount, []byte("{")) {
		err = json.Unmarshal(amount.Amount, &a)
	} else {
		err = json.Unmarshal(amount.Amount, &a.Amount)
	}
	if err != nil {
		return nil, api.Internal(err)
	}
	kind, _, _ := strings.Cut(key, "/")
	first := ""
	if len(rec.Branches) > 0 {
		first = rec.Branches[0]
	}
	return Reread{TransRef: ref, Kind: kind, FirstVerifiedAt: time.Unix(rec.FirstAt, 0).In(quota.Bangkok).Format(time.RFC3339),
		BranchID: first, AmountInSlip: a.Amount, RawSlip: rec.Result}, nil
}

// historyFields are the query parameters of a history listing; /b2b's
// adds branchId.
var historyFields = []string{"from", "to", "isDuplicate", "amountMin", "amountMax", "remark", "cursor", "limit"}

// Bounds of a history page.
const (
	defaultHistoryPage = 100
	maxHistoryPage     = 1000
)

// HistoryItem is one verification of a history listing.
type HistoryItem struct {
	VerifiedAt      string  `json:"verifiedAt"`
	BranchID        string  `json:"branchId"`
	Kind            string  `json:"kind"` // bank or wallet
	TransRef        string  `json:"transRef"`
	Amount          float64 `json:"amount"`
	SendingBank     *string `json:"sendingBank"`   // null for a wallet slip
	ReceivingBank   *string `json:"receivingBank"` // null for a wallet slip
	IsDuplicate     bool    `json:"isDuplicate"`
	IsAmountMatched bool    `json:"isAmountMatched"`
	IsDateMatched   *bool   `json:"isDateMatched"` // null when no date condition applied
	Remark          string  `json:"remark"`
	Mode            string  `json:"mode"`  // sync or async
	JobID           *string `json:"jobId"` // the async job's
}

// HistoryPage is the answer of a history listing (JSON).
type HistoryPage struct {
	Items      []HistoryItem `json:"items"`
	NextCursor *string       `json:"nextCursor"`
}

// csvAnswer is an answer in CSV, written as it is.
type csvAnswer []byte

// historyCSVHeader names the columns of a CSV history, HistoryItem's.
var historyCSVHeader = []string{"verifiedAt", "branchId", "kind", "transRef", "amount", "sendingBank", "receivingBank",
	"isDuplicate", "isAmountMatched", "isDateMatched", "remark", "mode", "jobId"}

// history answers GET /v2/verifications (the calling branch's) and GET
// /b2b/verifications (every branch of the service, or the one branchId
// names): newest first, a page at a time, in JSON or, with Accept:
// text/csv, CSV (the next page's cursor then in X-Next-Cursor).
func (s *Server) history(ctx *fasthttp.RequestCtx, c caller) (any, error) {
	f, _, err := readFields(ctx, c.version)
	if err != nil {
		return nil, err
	}
	q, err := historyQuery(f, c)
	if err != nil {
		return nil, err
	}
	if c.clientID != "" && q.BranchID != "" {
		if _, err := s.store.Branch(c.serviceID, q.BranchID); err != nil {
			return nil, manageError(err, "branch")
		}
	}
	list, next, err := s.store.History(q)
	if err != nil {
		return nil, api.Internal(err)
	}
	page := HistoryPage{Items: make([]HistoryItem, len(list))}
	for i, v := range list {
		page.Items[i] = historyItem(v)
	}
	if next != nil {
		cur := encodeCursor(*next)
		page.NextCursor = &cur
	}
	if !bytes.Contains(ctx.Request.Header.Peek(fasthttp.HeaderAccept), []byte("text/csv")) {
		return page, nil
	}
	if page.NextCursor != nil {
		ctx.Response.Header.Set(headerNextCursor, *page.NextCursor)
	}
	return historyCSV(page.Items), nil
}

// headerNextCursor carries the cursor of a CSV history's next page.
const headerNextCursor = "X-Next-Cursor"

// historyQuery reads the parameters of a history listing.
func historyQuery(f fields.Set, c caller) (store.HistoryQuery, error) {
	q := store.HistoryQuery{ServiceID: c.serviceID, BranchID: c.branchID, Limit: defaultHistoryPage}
	allowed := historyFields
	if c.clientID != "" { // /b2b: the service's, or one branch's
		allowed, q.BranchID = append(historyFields[:len(historyFields):len(historyFields)], "branchId"), ""
	}
	var fe api.FieldErrors
	f.Only(&fe, allowed...)
	if f.Has("branchId") {
		q.BranchID, _ = f.Str("branchId")
		if q.BranchID == "" {
			fe.Add("branchId", "must be a branch id")
		}
	}
	for name, dst := range map[string]*time.Time{"from": &q.From, "to": &q.To} {
		if t := dateField(f, &fe, name); t != nil {
			*dst = *t
		}
	}
	if f.Has("isDuplicate") {
		if b, ok := f.Boolean("isDuplicate"); ok {
			q.Duplicate = &b
		} else {
			fe.Add("isDuplicate", "must be true or false")
		}
	}
	q.AmountMin, q.AmountMax = amountField(f, &fe, "amountMin"), amountField(f, &fe, "amountMax")
	if f.Has("remark") {
		r, _ := f.Str("remark")
		q.Remark = &r
	}
	if f.Has("limit") {
		n, ok := f.Integer("limit")
		if !ok || n < 1 || n > maxHistoryPage {
			fe.Add("limit", "must be a whole number from 1 to "+strconv.Itoa(maxHistoryPage))
		}
		q.Limit = int(n)
	}
	if f.Has("cursor") {
		raw, _ := f.Str("cursor")
		cur, ok := decodeCursor(raw)
		if !ok {
			fe.Add("cursor", "must be a nextCursor of an earlier page")
		}
		q.After = cur
	}
	return q, fe.Err()
}

func historyItem(v store.Verification) HistoryItem {
	it := HistoryItem{VerifiedAt: v.At.In(quota.Bangkok).Format("2006-01-02T15:04:05.000Z07:00"), BranchID: v.BranchID,
		Amount: v.Amount, IsDuplicate: v.Duplicate, IsAmountMatched: v.AmountMatched, IsDateMatched: v.DateMatched,
		Remark: v.Remark, Mode: api.ModeSync}
	parts := strings.Split(v.SlipKey, "/") // bank/<sending bank>/<transRef> or wallet/<transaction id>
	it.Kind, it.TransRef = parts[0], parts[len(parts)-1]
	if len(parts) == 3 {
		sending, receiving := parts[1], v.ReceivingBank
		it.SendingBank, it.ReceivingBank = &sending, &receiving
	}
	if v.JobID != "" {
		job := v.JobID
		it.Mode, it.JobID = api.ModeAsync, &job
	}
	return it
}

// historyCSV writes items as CSV with a header row. A remark that a
// spreadsheet would take for a formula (=, +, -, @) is written after a
// single quote, so opening an export runs nothing a client wrote.
func historyCSV(items []HistoryItem) csvAnswer {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write(historyCSVHeader)
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	for _, it := range items {
		date := ""
		if it.IsDateMatched != nil {
			date = strconv.FormatBool(*it.IsDateMatched)
		}
		remark := it.Remark
		if remark != "" && strings.ContainsRune("=+-@\t\r", rune(remark[0])) {
			remark = "'" + remark
		}
		w.Write([]string{it.VerifiedAt, it.BranchID, it.Kind, it.TransRef, strconv.FormatFloat(it.Amount, 'f', 2, 64),
			str(it.SendingBank), str(it.ReceivingBank), strconv.FormatBool(it.IsDuplicate), strconv.FormatBool(it.IsAmountMatched),
			date, remark, it.Mode, str(it.JobID)})
	}
	w.Flush()
	return b.Bytes()
}

// encodeCursor writes a listing's position as an opaque token.
func encodeCursor(c store.Cursor) string {
	b := binary.AppendVarint(nil, c.AtMs)
	b = binary.AppendUvarint(b, uint64(len(c.BranchID)))
	b = append(append(b, c.BranchID...), c.SlipKey...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (store.Cursor, bool) {
	var c store.Cursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return c, false
	}
	at, n := binary.Varint(b)
	if n <= 0 {
		return c, false
	}
	l, m := binary.Uvarint(b[n:])
	if m <= 0 || l > uint64(len(b)-n-m) {
		return c, false
	}
	rest := b[n+m:]
	c.AtMs, c.BranchID, c.SlipKey = at, string(rest[:l]), string(rest[l:])
	return c, c.SlipKey != ""
}
