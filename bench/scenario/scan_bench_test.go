package scenario

import (
	"testing"

	"github.com/slipverify/slipverify/core/qrscan"
	"github.com/slipverify/slipverify/core/slip"
)

// BenchmarkScanPictures is what core spends reading the slip code of one
// bank-image upload (qrscan.Check and Scan, the slip parser accepting):
// each size class alone, then "all", the classes in turn as the scenario
// sends them. "decoded/op" is the share read (1 = all).
func BenchmarkScanPictures(b *testing.B) {
	p, err := SlipPictures()
	if err != nil {
		b.Fatal(err)
	}
	type pic struct {
		file    []byte
		payload string
	}
	const perClass = 8
	byClass := make([][]pic, p.Classes())
	var all []pic
	run := RunID()
	for n := range perClass * p.Classes() {
		i := n % p.Classes()
		payload := bankPayload(run, 'I', uint64(n))
		body, _, err := p.Append(nil, i, payload)
		if err != nil {
			b.Fatal(err)
		}
		byClass[i] = append(byClass[i], pic{filePart(body), payload})
		all = append(all, pic{filePart(body), payload})
	}
	accept := func(s string) bool {
		_, err := slip.ParseBank(s)
		return err == nil
	}
	bench := func(name string, set []pic) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			ok, n := 0, 0
			for i := 0; b.Loop(); i++ {
				s := set[i%len(set)]
				got, err := qrscan.Scan(s.file, accept)
				n++
				if err == nil && got == s.payload {
					ok++
				}
			}
			b.ReportMetric(float64(ok)/float64(n), "decoded/op")
		})
	}
	for i, set := range byClass {
		bench(p.classes[i].name, set)
	}
	bench("all", all)
}
