package promptpay

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/slipverify/slipverify/core/slip"
)

// object is one decoded TLV data object.
type object struct{ tag, value string }

// parseTLV decodes the top level of an EMVCo payload strictly: two-digit
// tags and lengths that add up exactly, no repeated tag, and a CRC tag 63
// last whose four upper-case hex digits are slip.CRC16 of everything before
// them. It is the test's independent reading of what Payload writes.
func parseTLV(s string) ([]object, error) {
	var out []object
	seen := map[string]bool{}
	for i := 0; i < len(s); {
		if len(s)-i < 4 {
			return nil, fmt.Errorf("truncated header at %d", i)
		}
		tag := s[i : i+2]
		n, err := strconv.Atoi(s[i+2 : i+4])
		if err != nil || !isDigits(tag) || !isDigits(s[i+2:i+4]) {
			return nil, fmt.Errorf("bad header %q at %d", s[i:i+4], i)
		}
		if i+4+n > len(s) {
			return nil, fmt.Errorf("tag %s: length %d runs past the end", tag, n)
		}
		if seen[tag] {
			return nil, fmt.Errorf("tag %s repeated", tag)
		}
		seen[tag] = true
		out = append(out, object{tag, s[i+4 : i+4+n]})
		i += 4 + n
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty payload")
	}
	last := out[len(out)-1]
	if last.tag != "63" || len(last.value) != 4 {
		return nil, fmt.Errorf("payload does not end with a 4-digit CRC tag 63")
	}
	if want := fmt.Sprintf("%04X", slip.CRC16(s[:len(s)-4])); last.value != want {
		return nil, fmt.Errorf("CRC %s, want %s", last.value, want)
	}
	return out, nil
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// FuzzPayload feeds arbitrary targets and amounts to Payload. It may not
// panic; an error must name its field; and an accepted input must give a
// payload with sound framing and CRC, in promptparse's tag order, whose
// proxy is the classified target and whose amount is the one asked for.
func FuzzPayload(f *testing.F) {
	for _, v := range loadVectors(f) {
		a, has := 0.0, v.Amount != nil
		if has {
			a = *v.Amount
		}
		f.Add(v.Target, a, has)
	}
	f.Add("+660812345678", 1.005, true)
	f.Add("", math.NaN(), true)
	f.Add("0812345678", math.Inf(1), true)
	f.Add("๐๘๑๒๓๔๕๖๗๘", -1.0, true)
	f.Fuzz(func(t *testing.T, target string, a float64, has bool) {
		var amount *float64
		if has {
			amount = &a
		}
		p, err := Payload(target, amount)
		kind, norm, cerr := Classify(target)
		if err != nil {
			for _, part := range strings.Split(err.Error(), "; ") {
				if !strings.HasPrefix(part, "target: ") && !strings.HasPrefix(part, "amount: ") {
					t.Fatalf("Payload(%q, %v): error %q does not name its field", target, fmtAmount(amount), err)
				}
			}
			if (cerr != nil) != strings.Contains(err.Error(), "target: ") {
				t.Fatalf("Payload(%q) error %q, but Classify says %v", target, err, cerr)
			}
			return
		}
		if cerr != nil {
			t.Fatalf("Payload(%q) accepted what Classify refuses: %v", target, cerr)
		}
		objs, perr := parseTLV(p)
		if perr != nil {
			t.Fatalf("Payload(%q, %v) = %q: %v", target, fmtAmount(amount), p, perr)
		}
		var tags []string
		for _, o := range objs {
			tags = append(tags, o.tag)
		}
		wantTags, initiation := "00 01 29 53 58 63", "11"
		if has {
			wantTags, initiation = "00 01 29 53 58 54 63", "12"
		}
		if got := strings.Join(tags, " "); got != wantTags || objs[0].value != "01" || objs[1].value != initiation {
			t.Fatalf("Payload(%q, %v) = %q: tags %s, want %s with 01 = %s", target, fmtAmount(amount), p, got, wantTags, initiation)
		}
		proxy := norm
		if kind == Phone {
			proxy = "0066" + norm[1:]
		}
		if want := "0016" + aid + kind.subTag() + fmt.Sprintf("%02d", len(proxy)) + proxy; objs[2].value != want {
			t.Fatalf("Payload(%q) tag 29 = %q, want %q", target, objs[2].value, want)
		}
		if has {
			got, err := strconv.ParseFloat(objs[5].value, 64)
			if err != nil || got != a || objs[5].value[len(objs[5].value)-3] != '.' || len(objs[5].value) > 13 {
				t.Fatalf("Payload(%q, %v) tag 54 = %q", target, a, objs[5].value)
			}
		}
		// The normalised target names the same proxy.
		if again, err := Payload(norm, amount); err != nil || again != p {
			t.Fatalf("Payload(%q) = %q but Payload(%q) = %q, %v", target, p, norm, again, err)
		}
	})
}
